//! How a file's values become a [`Config`](super::Config)'s: durations, and Redisson's own
//! names, read only to point at distlock's.

/// Serde's reading of a duration field: a string as it is, a number as that many seconds (a
/// number of 1000 or more refused: most likely Redisson's milliseconds).
pub(super) fn duration_field<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<String>, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a duration: a string (\"30s\", \"250ms\") or a number of seconds")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<Self::Value, E> {
            if !(0.0..1000.0).contains(&v) {
                return Err(E::custom(format!(
                    "{v} is ambiguous: a number here is seconds (as in the distlock command), \
                     not Redisson's milliseconds; write \"{v}ms\" or a number of seconds below \
                     1000 (or a string such as \"30s\")"
                )));
            }
            Ok(Some(v.to_string()))
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<Self::Value, E> {
            if v >= 1000 {
                return Err(E::custom(format!(
                    "{v} is ambiguous: a number here is seconds (as in the distlock command), \
                     not Redisson's milliseconds; write \"{v}ms\", or a string such as \"30s\""
                )));
            }
            Ok(Some(v.to_string()))
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<Self::Value, E> {
            match u64::try_from(v) {
                Ok(v) => self.visit_u64(v),
                Err(_) => Err(E::custom(format!("{v}: a duration cannot be negative"))),
            }
        }
        fn visit_none<E: serde::de::Error>(self) -> std::result::Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: serde::Deserializer<'de>>(
            self,
            d: D,
        ) -> std::result::Result<Self::Value, D::Error> {
            d.deserialize_any(V)
        }
    }
    d.deserialize_option(V)
}

/// Redisson's YAML names for what a [`Config`](super::Config) spells otherwise, each with
/// distlock's form; a file that uses one is refused with that form rather than with serde's
/// bare "unknown field".
const REDISSON_NAMES: &[(&str, &str)] = &[
    (
        "singleServerConfig",
        "single: {address: \"redis://host:6379\"} (password, username and database at the top level)",
    ),
    (
        "sentinelServersConfig",
        "sentinel: {nodes: [\"redis://host:26379\", …], master: \"mymaster\"} (Redisson's \
         sentinelAddresses and masterName)",
    ),
    (
        "clusterServersConfig",
        "cluster: {nodes: [\"redis://host:7000\", …]} (Redisson's nodeAddresses)",
    ),
    (
        "lockWatchdogTimeout",
        "watchdog_lease: \"30s\" (Redisson's value is milliseconds; a bare number here is seconds)",
    ),
];

/// Refuses Redisson's name `name` with distlock's form of it.
fn redisson_name<E: serde::de::Error>(name: &str) -> E {
    let form = REDISSON_NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map_or("", |(_, form)| *form);
    E::custom(format!(
        "`{name}` is Redisson's name; distlock's config writes it as {form}"
    ))
}

/// One deserializer per Redisson name (serde's `deserialize_with` names a function).
macro_rules! refuse_redisson {
    ($($f:ident => $name:literal),*) => {$(
        pub(super) fn $f<'de, D: serde::Deserializer<'de>>(
            _: D,
        ) -> std::result::Result<(), D::Error> {
            Err(redisson_name::<D::Error>($name))
        }
    )*};
}
refuse_redisson!(
    single_server_config => "singleServerConfig",
    sentinel_servers_config => "sentinelServersConfig",
    cluster_servers_config => "clusterServersConfig",
    lock_watchdog_timeout => "lockWatchdogTimeout"
);
