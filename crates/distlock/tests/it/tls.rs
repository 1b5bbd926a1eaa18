//! `rediss://` (TLS through rustls) and the database number in the URL.

use distlock::{Client, ErrorKind};

use crate::util::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_work_over_tls() {
    let server = RedisServer::options().tls().start();
    let client = Client::connect(&server.url()).await.expect("TLS connect");
    let g = client.lock("over-tls").acquire().await.unwrap();
    assert!(client
        .lock("over-tls")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    g.release().await.unwrap();
    assert!(!client.lock("over-tls").is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_verifies_certificates_by_default() {
    let server = RedisServer::options().tls().start();
    let url = server.url().replace("#insecure", "");
    let err = Client::connect(&url).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    // `?insecure`, the Sentinel and Cluster URLs' form, skips the check here too.
    let client = Client::connect(&format!("{url}?insecure"))
        .await
        .expect("?insecure skips verification");
    client
        .lock("q-insecure")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
}

/// A private CA: `rediss://` without `#insecure` is verified against the CA given to the
/// builder (the server's name included), and a CA that did not sign the server's
/// certificate is refused; an unparsable PEM is a configuration error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_ca_verifies_the_server() {
    let server = RedisServer::options().tls().start();
    let url = server.url().replace("#insecure", "");
    let ca = std::fs::read(server.tls_ca_cert().expect("a TLS server has a CA")).unwrap();
    let client = Client::builder()
        .url(&url)
        .tls_ca_cert(ca)
        .build()
        .await
        .expect("verified against the test CA");
    let g = client.lock("private-ca").acquire().await.unwrap();
    g.release().await.unwrap();

    let other = RedisServer::options().tls().start();
    let other_ca = std::fs::read(other.tls_ca_cert().unwrap()).unwrap();
    let err = Client::builder()
        .url(&url)
        .tls_ca_cert(other_ca)
        .build()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connection, "another CA: {err}");

    let err = Client::builder()
        .url(&url)
        .tls_ca_cert(b"not a certificate".to_vec())
        .build()
        .await
        .unwrap_err();
    assert!(err.kind() == ErrorKind::Config, "bad PEM: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_number_in_the_url_is_used() {
    let server = RedisServer::start();
    let url = format!("{}3", server.url());
    let client = Client::connect(&url).await.unwrap();
    let g = client.lock("in-db-3").acquire().await.unwrap();
    let in_db0: bool = cmd(&server, &["EXISTS", "in-db-3"]);
    assert!(!in_db0);
    let mut con = server.connection();
    let _: () = redis::cmd("SELECT").arg(3).query(&mut con).unwrap();
    let in_db3: bool = redis::cmd("EXISTS").arg("in-db-3").query(&mut con).unwrap();
    assert!(in_db3);
    g.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_prefix_is_put_before_every_key() {
    let server = RedisServer::start();
    let client = Client::builder()
        .url(server.url())
        .key_prefix("app:")
        .build()
        .await
        .unwrap();
    let g = client.lock("orders").acquire().await.unwrap();
    assert_eq!(g.lock().key(), "app:orders");
    assert_eq!(g.lock().channel(), "redisson_lock__channel:{app:orders}");
    let exists: bool = cmd(&server, &["EXISTS", "app:orders"]);
    assert!(exists);
    let counter = g.lock().fencing_counter_key();
    assert!(
        counter.starts_with("app:distlock:fencing-counter:{"),
        "{counter}"
    );
    g.release().await.unwrap();
    assert!(keys(&server).contains(&counter));
}
