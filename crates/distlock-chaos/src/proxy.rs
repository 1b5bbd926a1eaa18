//! A TCP proxy per server, in process (tokio): delays, blackholes or cuts connections in
//! either direction.
