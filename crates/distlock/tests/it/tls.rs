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
