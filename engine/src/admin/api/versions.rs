//! What the older API versions show differently from version 9, for the paths corelb serves in all of them: the
//! error object kept `path` and `method` (empty) until version 4, and a server's `drain` came with version 2.
//! (The paths each version has are in [`super::route`]; `/ssl`'s version 8 details in [`super::status`].)

use super::json::Json;
use super::route::{Block, Target};

/// The documentation link nginx Plus puts in every error object.
const HREF: &str = "https://nginx.org/en/docs/http/ngx_http_api_module.html";

/// nginx Plus's error object in `version`.
pub fn error_object(version: u32, status: u16, code: &str, text: &str) -> Json {
    let mut f = Vec::new();
    if version < 4 {
        f.push(("path", Json::str("")));
        f.push(("method", Json::str("")));
    }
    f.extend([
        (
            "error",
            Json::obj([
                ("status", Json::Num(u64::from(status))),
                ("text", Json::str(text.to_string())),
                ("code", Json::str(code.to_string())),
            ]),
        ),
        ("request_id", Json::str("")),
        ("href", Json::str(HREF)),
    ]);
    Json::obj(f)
}

/// Reshapes a version 9 answer for `target` as `version` shows it.
pub fn shape(version: u32, target: Target<'_>, body: &mut Json) {
    if version >= 2 {
        return;
    }
    // Version 1 servers have no `drain`.
    match (target, body) {
        (Target::Server(Block::Http, ..), server @ Json::Obj(_)) => drop_field(server, "drain"),
        (Target::Servers(Block::Http, _), Json::Arr(servers)) => {
            for s in servers {
                drop_field(s, "drain");
            }
        }
        (Target::Servers(Block::Http, _), server @ Json::Obj(_)) => drop_field(server, "drain"),
        _ => {}
    }
}

fn drop_field(obj: &mut Json, name: &str) {
    if let Json::Obj(fields) = obj {
        fields.retain(|(k, _)| k != name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_kept_path_and_method_until_version_4() {
        let e3 = error_object(3, 404, "PathNotFound", "path not found").render();
        assert_eq!(
            e3,
            r#"{"path":"","method":"","error":{"status":404,"text":"path not found","code":"PathNotFound"},"request_id":"","href":"https://nginx.org/en/docs/http/ngx_http_api_module.html"}"#
        );
        let e4 = error_object(4, 404, "PathNotFound", "path not found").render();
        assert!(e4.starts_with(r#"{"error":"#), "{e4}");
    }

    #[test]
    fn version_1_servers_have_no_drain() {
        let server = || {
            Json::obj([
                ("id", Json::Num(0)),
                ("down", Json::Bool(false)),
                ("drain", Json::Bool(true)),
            ])
        };
        let mut one = server();
        shape(1, Target::Server(Block::Http, "b", "0"), &mut one);
        assert_eq!(one.render(), r#"{"id":0,"down":false}"#);
        let mut list = Json::Arr(vec![server(), server()]);
        shape(1, Target::Servers(Block::Http, "b"), &mut list);
        assert_eq!(list.render(), r#"[{"id":0,"down":false},{"id":0,"down":false}]"#);
        let mut two = server();
        shape(2, Target::Server(Block::Http, "b", "0"), &mut two);
        assert_eq!(two, server());
    }
}
