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

/// Refuses Redisson's name `name` with distlock's `form` of it (rather than serde's bare
/// "unknown field").
fn redisson_name<E: serde::de::Error>(name: &str, form: &str) -> E {
    E::custom(format!(
        "`{name}` is Redisson's name; distlock's config writes it as {form}"
    ))
}

/// One deserializer per Redisson YAML name, with distlock's form of it (serde's
/// `deserialize_with` names a function and passes no field name).
macro_rules! refuse_redisson {
    ($($f:ident => $name:literal, $form:expr;)*) => {$(
        pub(super) fn $f<'de, D: serde::Deserializer<'de>>(
            _: D,
        ) -> std::result::Result<(), D::Error> {
            Err(redisson_name::<D::Error>($name, $form))
        }
    )*};
}
refuse_redisson!(
    single_server_config => "singleServerConfig",
        "single: {address: \"redis://host:6379\"} (password, username and database at the top level)";
    sentinel_servers_config => "sentinelServersConfig",
        "sentinel: {nodes: [\"redis://host:26379\", …], master: \"mymaster\"} (Redisson's \
         sentinelAddresses and masterName)";
    cluster_servers_config => "clusterServersConfig",
        "cluster: {nodes: [\"redis://host:7000\", …]} (Redisson's nodeAddresses)";
    lock_watchdog_timeout => "lockWatchdogTimeout",
        "watchdog_lease: \"30s\" (Redisson's value is milliseconds; a bare number here is seconds)";
);
