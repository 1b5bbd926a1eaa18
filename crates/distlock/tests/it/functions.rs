//! Scripts called as Redis Functions (`FCALL` of one library loaded at connect) where the
//! server and the user allow it, `EVALSHA` otherwise; a server that lost the library gets it
//! again on the next call.

use distlock::{Client, ScriptCalls};

use crate::util::*;

/// The function libraries loaded on `server`, by name.
fn libraries(server: &RedisServer) -> Vec<String> {
    let list: redis::Value = cmd(server, &["FUNCTION", "LIST"]);
    let mut names = Vec::new();
    if let redis::Value::Array(libs) = list {
        for lib in libs {
            let fields: Vec<redis::Value> = match lib {
                redis::Value::Array(f) => f,
                redis::Value::Map(m) => m.into_iter().flat_map(|(k, v)| [k, v]).collect(),
                _ => continue,
            };
            for pair in fields.chunks(2) {
                if let [k, v] = pair {
                    if redis::from_redis_value::<String>(k.clone()).ok().as_deref()
                        == Some("library_name")
                    {
                        names.push(redis::from_redis_value::<String>(v.clone()).unwrap());
                    }
                }
            }
        }
    }
    names
}

/// One plain-lock cycle on `client`, checked.
async fn cycle(client: &Client, name: &str) {
    let guard = client.lock(name).acquire().await.unwrap();
    assert!(guard.fencing_token().get() > 0);
    guard.release().await.unwrap();
}

/// On Redis 7 the client loads its library and calls it: `FCALL`s run, no `EVALSHA`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_run_as_functions_where_the_server_has_them() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let ScriptCalls::Functions { library } = client.script_calls() else {
        panic!("expected functions, got {}", client.script_calls());
    };
    assert!(library.starts_with("distlock_"), "{library}");
    assert_eq!(libraries(&server), [library.to_string()]);
    // A second client of the same version uses the library as it is.
    let other = Client::connect(&server.url()).await.unwrap();
    assert_eq!(other.script_calls(), client.script_calls());
    let (fcalls, evalshas) = (
        command_calls(&server, "fcall"),
        command_calls(&server, "evalsha"),
    );
    cycle(&client, "fn-cycle").await;
    cycle(&other, "fn-cycle").await;
    assert!(command_calls(&server, "fcall") >= fcalls + 4);
    assert_eq!(command_calls(&server, "evalsha"), evalshas, "no EVALSHA");
}

/// A server that lost the library (`FUNCTION FLUSH`; as after a restart without
/// persistence) still runs every call, and has the library again after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_library_is_loaded_again_and_the_call_still_runs() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let ScriptCalls::Functions { library } = client.script_calls() else {
        panic!("expected functions, got {}", client.script_calls());
    };
    let _: () = cmd(&server, &["FUNCTION", "FLUSH"]);
    assert!(libraries(&server).is_empty());
    cycle(&client, "fn-lost").await;
    assert_eq!(libraries(&server), [library.to_string()]);
    let evals = command_calls(&server, "eval");
    cycle(&client, "fn-lost").await;
    assert_eq!(
        command_calls(&server, "eval"),
        evals,
        "FCALL again, no EVAL"
    );
}

/// A user without `+function|load` and `+fcall` (the README's minimal ACL) calls
/// `EVALSHA`, and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_who_may_not_load_functions_calls_evalsha() {
    let server = RedisServer::start();
    let _: () = cmd(
        &server,
        &[
            "ACL",
            "SETUSER",
            "nofn",
            "reset",
            "on",
            ">pw",
            "~*",
            "&*",
            "+@all",
            "-function",
        ],
    );
    let client = Client::connect(&format!("redis://nofn:pw@127.0.0.1:{}/", server.port()))
        .await
        .unwrap();
    let calls = client.script_calls();
    assert!(
        matches!(calls, ScriptCalls::Evalsha { reason } if reason.contains("ACL")),
        "{calls}"
    );
    assert!(libraries(&server).is_empty());
    let evalshas = command_calls(&server, "evalsha");
    cycle(&client, "fn-acl").await;
    assert!(command_calls(&server, "evalsha") >= evalshas + 2);
    // One who may load but not call: the same.
    let _: () = cmd(
        &server,
        &[
            "ACL", "SETUSER", "nocall", "reset", "on", ">pw", "~*", "&*", "+@all", "-fcall",
        ],
    );
    let client = Client::connect(&format!("redis://nocall:pw@127.0.0.1:{}/", server.port()))
        .await
        .unwrap();
    assert!(
        matches!(client.script_calls(), ScriptCalls::Evalsha { .. }),
        "{}",
        client.script_calls()
    );
    cycle(&client, "fn-acl").await;
}

/// `redis_functions(false)` leaves the server's libraries alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turned_off_functions_load_nothing() {
    let server = RedisServer::start();
    let client = evalsha_client(&server).await;
    assert!(
        matches!(client.script_calls(), ScriptCalls::Evalsha { reason } if reason.contains("redis_functions")),
        "{}",
        client.script_calls()
    );
    cycle(&client, "fn-off").await;
    assert!(libraries(&server).is_empty());
    assert_eq!(command_calls(&server, "fcall"), 0);
}
