//! Redis Cluster hash slots: a key's slot, and the slot tags that name the fencing counter of
//! each.

use std::sync::LazyLock;

/// Number of Redis Cluster hash slots.
pub const SLOTS: u16 = 16384;

/// CRC16/XMODEM (poly 0x1021, init 0, no reflection), the checksum Redis Cluster hashes keys
/// with.
pub(super) const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);

/// Returns the part of `key` Redis Cluster hashes.
///
/// The text between the first `{` and the first `}` after it, when that is not empty; otherwise the
/// whole key (redis.io cluster spec, "Hash tags").
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        let rest = &key[open + 1..];
        if let Some(close) = rest.iter().position(|&b| b == b'}') {
            if close > 0 {
                return &rest[..close];
            }
        }
    }
    key
}

/// Returns the Redis Cluster hash slot of `key`.
///
/// CRC16/XMODEM of its [hash tag](hash_tag) (or of the whole key) mod 16384, as `CLUSTER KEYSLOT`
/// answers.
pub fn key_slot(key: impl AsRef<[u8]>) -> u16 {
    CRC16.checksum(hash_tag(key.as_ref())) % SLOTS
}

/// Characters of the slot tags, in the order they are enumerated (ASCII order).
const TAG_ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Longest slot tag: every slot has an alphanumeric string of at most 3 characters.
const TAG_MAX_LEN: usize = 3;

/// [`slot_tag`]'s table, one tag per slot, zero-padded; computed once, on first use (about a
/// millisecond: 62 + 62² + 62³ checksums of at most 3 bytes).
static SLOT_TAGS: LazyLock<Box<[[u8; TAG_MAX_LEN]]>> = LazyLock::new(|| {
    let mut tags = vec![[0u8; TAG_MAX_LEN]; SLOTS as usize];
    let mut missing = SLOTS as usize;
    let mut buf = [0u8; TAG_MAX_LEN];
    for len in 1..=TAG_MAX_LEN {
        // Every string of `len` characters, in lexicographic order: an odometer over
        // TAG_ALPHABET, the last character turning fastest.
        let mut digits = [0usize; TAG_MAX_LEN];
        'strings: loop {
            for (b, &d) in buf.iter_mut().zip(&digits[..len]) {
                *b = TAG_ALPHABET[d];
            }
            let tag = &mut tags[usize::from(CRC16.checksum(&buf[..len]) % SLOTS)];
            if tag[0] == 0 {
                tag[..len].copy_from_slice(&buf[..len]);
                missing -= 1;
            }
            let mut i = len;
            loop {
                if i == 0 {
                    break 'strings;
                }
                i -= 1;
                digits[i] += 1;
                if digits[i] < TAG_ALPHABET.len() {
                    break;
                }
                digits[i] = 0;
            }
        }
    }
    assert_eq!(
        missing, 0,
        "a slot without a tag of at most {TAG_MAX_LEN} characters"
    );
    tags.into_boxed_slice()
});

/// Returns the slot tag of `slot`.
///
/// The first alphanumeric string whose CRC16/XMODEM mod 16384 is `slot`, enumerating shorter
/// strings first and strings of one length in ASCII order (`0`–`9`, `A`–`Z`, `a`–`z`). So `{<tag>}`
/// in a key puts the key in `slot`. At most 3 characters. Part of the wire contract: the fencing
/// counter key of a slot is named by it.
///
/// # Panics
/// When `slot` is 16384 or more.
pub fn slot_tag(slot: u16) -> &'static str {
    assert!(slot < SLOTS, "slot {slot} out of range 0..{SLOTS}");
    let tag = &SLOT_TAGS[usize::from(slot)];
    let len = tag.iter().position(|&b| b == 0).unwrap_or(TAG_MAX_LEN);
    std::str::from_utf8(&tag[..len]).expect("alphanumeric")
}
