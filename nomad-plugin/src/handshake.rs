//! go-plugin's process handshake as Nomad runs it: the magic cookie that tells a plugin it
//! was started by Nomad, the app protocol version the client asks for, and the one line
//! the plugin prints on stdout to say where it listens.

/// The environment variable Nomad sets when it starts a plugin.
pub const MAGIC_COOKIE_KEY: &str = "NOMAD_PLUGIN_MAGIC_COOKIE";
/// Its value (Nomad's `plugins/base` handshake).
pub const MAGIC_COOKIE_VALUE: &str =
    "e4327c2e01eabfd75a8a67adb114fb34a757d57eee7728d857a8cec6e91a7255";
/// go-plugin's own protocol version, the first field of the handshake line.
pub const CORE_PROTOCOL_VERSION: u32 = 1;
/// App protocol versions served. Nomad 0.9 and later ask for 2; older clients of Nomad's
/// base handshake ask for 1; both are the same gRPC services here.
pub const APP_PROTOCOL_VERSIONS: [u32; 2] = [2, 1];

/// What a person who runs the binary by hand reads (on stderr; exit status 1).
pub const NOT_FROM_NOMAD: &str = "This binary is a plugin for Nomad (paddock-nomad-driver). \
These are not meant to be executed directly.\nPut it in a Nomad client's plugin_dir and \
configure it with a plugin \"paddock\" block; see README, \"Running in a Nomad cluster\".";

/// Whether the environment carries Nomad's cookie.
pub fn cookie_ok(value: Option<&str>) -> bool {
    value == Some(MAGIC_COOKIE_VALUE)
}

/// The app protocol version to speak, given `PLUGIN_PROTOCOL_VERSIONS` (a comma-separated
/// list, absent from old clients): the highest one both sides know, else the default 2
/// (which a client that asked for other versions then refuses with its own message).
pub fn app_version(requested: Option<&str>) -> u32 {
    let asked: Vec<u32> = requested
        .unwrap_or("")
        .split(',')
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    APP_PROTOCOL_VERSIONS
        .into_iter()
        .find(|v| asked.contains(v))
        .unwrap_or(APP_PROTOCOL_VERSIONS[0])
}

/// The handshake line (with its newline): core version, app version, network, address,
/// protocol, and an empty server-certificate field (no automatic mTLS).
pub fn line(app_version: u32, socket: &std::path::Path) -> String {
    format!(
        "{CORE_PROTOCOL_VERSION}|{app_version}|unix|{}|grpc|\n",
        socket.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_the_highest_both_know() {
        assert_eq!(app_version(Some("2")), 2);
        assert_eq!(app_version(Some("1")), 1);
        assert_eq!(app_version(Some("1,2,3")), 2);
        assert_eq!(app_version(Some("5")), 2);
        assert_eq!(app_version(None), 2);
    }

    #[test]
    fn the_line_has_six_fields_and_ends_the_line() {
        let l = line(2, std::path::Path::new("/tmp/x/plugin.sock"));
        assert_eq!(l, "1|2|unix|/tmp/x/plugin.sock|grpc|\n");
        assert_eq!(l.trim_end().split('|').count(), 6);
    }

    #[test]
    fn only_nomads_cookie_passes() {
        assert!(cookie_ok(Some(MAGIC_COOKIE_VALUE)));
        assert!(!cookie_ok(Some("x")));
        assert!(!cookie_ok(None));
    }
}
