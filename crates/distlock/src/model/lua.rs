//! Redis's script semantics over the in-memory keyspace: the script's text run unchanged by
//! Lua 5.1 (as Redis embeds it), atomically, with `KEYS`, `ARGV` and the `redis` table
//! (`call` raising and `pcall` returning errors, `error_reply`, `status_reply`), and the
//! Lua ↔ RESP conversions Redis documents (EVAL's "Conversion between Lua and Redis data
//! types"): false is nil, numbers are cut to integers, a table is cut at its first nil, a
//! table with `ok` or `err` is a status or an error.

use std::cell::RefCell;
use std::rc::Rc;

use mlua::{Lua, MultiValue, Table, Value as LuaValue, Variadic};

use super::keyspace::{Keyspace, Reply};
use super::values::fmt_g17;

/// Most `redis.call`s one script run may make: a script that loops past it is a bug (every
/// script's header bounds its loops), reported as an error reply.
pub(crate) const MAX_CALLS: usize = 20_000;

/// One Lua state per thread, with the `redis` table installed and every script compiled
/// once (by its text), as a server keeps its script cache: the model runs scripts millions of
/// times. Each run gets fresh `KEYS` and `ARGV`; a script's locals are its chunk's, fresh on
/// every call.
struct Engine {
    lua: Lua,
    /// The keyspace of the run under way, and the `redis.call`s it made.
    shared: Rc<RefCell<(Keyspace, usize)>>,
    wrapper: mlua::Function,
    compiled: std::collections::HashMap<String, mlua::Function>,
}

thread_local! {
    static ENGINE: RefCell<Option<Engine>> = const { RefCell::new(None) };
}

/// Run `script` with `keys` and `args` against `ks`, as `EVAL` does: the reply, or the error
/// reply a failing script gives. The keyspace's clock stands still during the run.
pub(crate) fn eval(ks: &mut Keyspace, script: &str, keys: &[Vec<u8>], args: &[Vec<u8>]) -> Reply {
    ENGINE.with(|e| {
        let mut e = e.borrow_mut();
        let engine = match e.as_mut() {
            Some(engine) => engine,
            None => e.insert(Engine::new().expect("the model's Lua state")),
        };
        // The keyspace lives in the Lua callbacks for the run, and comes back after it.
        *engine.shared.borrow_mut() = (std::mem::replace(ks, Keyspace::new(0)), 0);
        let reply = engine
            .run(script, keys, args)
            .unwrap_or_else(|err| lua_error_reply(&err));
        let back = std::mem::replace(&mut engine.shared.borrow_mut().0, Keyspace::new(0));
        *ks = back;
        reply
    })
}

impl Engine {
    fn new() -> mlua::Result<Engine> {
        let lua = Lua::new();
        let shared = Rc::new(RefCell::new((Keyspace::new(0), 0usize)));
        let redis = lua.create_table()?;
        let pcall = {
            let shared = shared.clone();
            lua.create_function(move |lua, a: Variadic<LuaValue>| {
                let mut argv = Vec::with_capacity(a.len());
                for v in a.iter() {
                    match v {
                        LuaValue::String(s) => argv.push(s.as_bytes().to_vec()),
                        LuaValue::Integer(i) => argv.push(i.to_string().into_bytes()),
                        LuaValue::Number(n) => argv.push(number_arg(*n).into_bytes()),
                        _ => {
                            return Err(mlua::Error::runtime(
                                "Lua redis lib command arguments must be strings or integers",
                            ))
                        }
                    }
                }
                if argv.is_empty() {
                    return Err(mlua::Error::runtime(
                        "Please specify at least one argument for this redis lib call",
                    ));
                }
                let reply = {
                    let mut s = shared.borrow_mut();
                    s.1 += 1;
                    if s.1 > MAX_CALLS {
                        Reply::Error(format!(
                            "ERR model: more than {MAX_CALLS} calls in one script"
                        ))
                    } else {
                        s.0.exec(&argv)
                    }
                };
                to_lua(lua, &reply)
            })?
        };
        redis.set("pcall", pcall)?;
        redis.set(
            "error_reply",
            lua.create_function(|lua, e: mlua::LuaString| {
                let t = lua.create_table()?;
                t.set("err", e)?;
                Ok(t)
            })?,
        )?;
        redis.set(
            "status_reply",
            lua.create_function(|lua, s: mlua::LuaString| {
                let t = lua.create_table()?;
                t.set("ok", s)?;
                Ok(t)
            })?,
        )?;
        // Redis 7's: the scripts raise error tables there (Redis 6.2, without it, strings).
        redis.set("REDIS_VERSION", "7.0.15")?;
        lua.globals().set("redis", redis)?;
        // redis.call raises the command's error reply as a Lua error whose value is the error
        // table (as Redis 7 does: a script's pcall(redis.call, …) gets the table), and a
        // script that raises answers that error unchanged, or any other error as ERR.
        let wrapper: mlua::Function = lua
            .load(
                r#"
                redis.call = function(...)
                  local r = redis.pcall(...)
                  if type(r) == 'table' and r.err then error(r, 0) end
                  return r
                end
                return function(f)
                  local ok, r = pcall(f)
                  if ok then return r end
                  if type(r) == 'table' and r.err then return r end
                  return {err = 'ERR user_script: ' .. tostring(r)}
                end
                "#,
            )
            .set_name("@model_wrapper")
            .eval()?;
        Ok(Engine {
            lua,
            shared,
            wrapper,
            compiled: std::collections::HashMap::new(),
        })
    }

    fn run(&mut self, script: &str, keys: &[Vec<u8>], args: &[Vec<u8>]) -> mlua::Result<Reply> {
        let globals = self.lua.globals();
        globals.set("KEYS", strings(&self.lua, keys)?)?;
        globals.set("ARGV", strings(&self.lua, args)?)?;
        // Each text is compiled once.
        let f = match self.compiled.get(script) {
            Some(f) => f.clone(),
            None => {
                let f = self
                    .lua
                    .load(script)
                    .set_name("@user_script")
                    .into_function()?;
                self.compiled.insert(script.to_string(), f.clone());
                f
            }
        };
        let out: MultiValue = self.wrapper.call(f)?;
        Ok(from_lua(out.into_iter().next().unwrap_or(LuaValue::Nil)))
    }
}

/// The error reply of a script that could not run at all (a syntax error).
fn lua_error_reply(e: &mlua::Error) -> Reply {
    Reply::Error(format!("ERR user_script: {e}"))
}

/// A Lua number passed to `redis.call`: Redis formats it with `%.17g`.
fn number_arg(n: f64) -> String {
    fmt_g17(n)
}

fn strings(lua: &Lua, items: &[Vec<u8>]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, b) in items.iter().enumerate() {
        t.raw_set(i + 1, lua.create_string(b)?)?;
    }
    Ok(t)
}

/// RESP → Lua, as `redis.call` returns a reply.
fn to_lua(lua: &Lua, r: &Reply) -> mlua::Result<LuaValue> {
    Ok(match r {
        Reply::Nil => LuaValue::Boolean(false),
        Reply::Int(i) => LuaValue::Number(*i as f64),
        Reply::Bulk(b) => LuaValue::String(lua.create_string(b)?),
        Reply::Array(a) => {
            let t = lua.create_table_with_capacity(a.len(), 0)?;
            for (i, item) in a.iter().enumerate() {
                t.raw_set(i + 1, to_lua(lua, item)?)?;
            }
            LuaValue::Table(t)
        }
        Reply::Status(s) => {
            let t = lua.create_table()?;
            t.set("ok", s.as_str())?;
            LuaValue::Table(t)
        }
        Reply::Error(e) => {
            let t = lua.create_table()?;
            t.set("err", e.as_str())?;
            LuaValue::Table(t)
        }
    })
}

/// Lua → RESP, as a script's return value becomes its reply.
fn from_lua(v: LuaValue) -> Reply {
    match v {
        LuaValue::Nil | LuaValue::Boolean(false) => Reply::Nil,
        LuaValue::Boolean(true) => Reply::Int(1),
        LuaValue::Integer(i) => Reply::Int(i),
        LuaValue::Number(n) => Reply::Int(n as i64),
        LuaValue::String(s) => Reply::Bulk(s.as_bytes().to_vec()),
        LuaValue::Table(t) => {
            if let Ok(LuaValue::String(e)) = t.raw_get::<LuaValue>("err") {
                return Reply::Error(e.to_string_lossy());
            }
            if let Ok(LuaValue::String(s)) = t.raw_get::<LuaValue>("ok") {
                return Reply::Status(s.to_string_lossy());
            }
            let mut out = Vec::new();
            for i in 1.. {
                match t.raw_get::<LuaValue>(i) {
                    Ok(LuaValue::Nil) | Err(_) => break,
                    Ok(v) => out.push(from_lua(v)),
                }
            }
            Reply::Array(out)
        }
        _ => Reply::Nil,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    #[test]
    fn scripts_convert_as_redis_does() {
        let mut ks = Keyspace::new(1_700_000_000_000_000);
        let r = eval(
            &mut ks,
            "redis.call('set', KEYS[1], ARGV[1]); return {1, 'a', false, 'b', 2.9, nil, 'cut'}",
            &[b("k")],
            &[b("v")],
        );
        // false is nil, numbers are cut to integers, the array ends at its first nil.
        assert_eq!(
            r,
            Reply::Array(vec![
                Reply::Int(1),
                Reply::Bulk(b("a")),
                Reply::Nil,
                Reply::Bulk(b("b")),
                Reply::Int(2)
            ])
        );
        assert_eq!(
            ks.entry(b"k").map(|e| e.val.clone()),
            Some(super::super::keyspace::Val::Str(b("v")))
        );
        // redis.call raises the command's error; pcall returns it.
        let r = eval(
            &mut ks,
            "redis.call('hget', KEYS[1], 'f') return 1",
            &[b("k")],
            &[],
        );
        assert_eq!(r.error_code(), Some("WRONGTYPE"));
        let r = eval(
            &mut ks,
            "local r = redis.pcall('hget', KEYS[1], 'f') return type(r) == 'table' and r.err ~= nil",
            &[b("k")],
            &[],
        );
        assert_eq!(r, Reply::Int(1));
        let r = eval(
            &mut ks,
            "return redis.error_reply('WRONGTYPE distlock: x')",
            &[],
            &[],
        );
        assert_eq!(r, Reply::Error("WRONGTYPE distlock: x".into()));
        let r = eval(&mut ks, "return redis.call('get', 'missing')", &[], &[]);
        assert_eq!(r, Reply::Nil);
        let r = eval(&mut ks, "return 1 < nil", &[], &[]);
        assert_eq!(r.error_code(), Some("ERR"));
    }
}
