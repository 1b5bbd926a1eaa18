//! Unit tests of the client's settings.

#[test]
fn credentials_given_apart_replace_the_urls_encoded() {
    use super::builder::with_credentials as w;
    assert_eq!(
        w("redis://h:1/0", None, Some("p@:/?#%")),
        "redis://:p%40%3A%2F%3F%23%25@h:1/0"
    );
    assert_eq!(w("redis://u:old@h/", None, Some("n")), "redis://u:n@h/");
    assert_eq!(w("redis://u:old@h/", Some("v"), None), "redis://v:old@h/");
    assert_eq!(w("redis://u@h/", None, None), "redis://u@h/");
    assert_eq!(
        w("redis-sentinel://:x@s1,s2/0#m", Some("a b"), Some("y")),
        "redis-sentinel://a%20b:y@s1,s2/0#m"
    );
    assert_eq!(
        w("unix:///tmp/r.sock?db=1", Some("u"), Some("p&q")),
        "unix:///tmp/r.sock?db=1&user=u&pass=p%26q"
    );
    assert_eq!(
        w("redis+unix:///s", None, Some("p")),
        "redis+unix:///s?pass=p"
    );
}

use super::builder::{app_name_from, check_app_name};

#[test]
fn app_names_are_checked() {
    for good in ["orders", "a", "my-app_2.0", &"x".repeat(64)] {
        assert!(check_app_name(good).is_ok(), "{good:?}");
    }
    for bad in ["", "my app", "a:b", "café", &"x".repeat(65)] {
        let e = check_app_name(bad).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Config, "{bad:?}");
    }
}

#[test]
fn default_app_names_are_made_valid() {
    assert_eq!(app_name_from("orders-service"), "orders-service");
    assert_eq!(app_name_from("my app"), "my_app");
    assert_eq!(app_name_from(""), "app");
    assert_eq!(app_name_from(&"y".repeat(100)), "y".repeat(64));
    assert!(check_app_name(&app_name_from("ünïcode name")).is_ok());
}
