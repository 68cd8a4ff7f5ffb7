//! The `template` hook's language (parse and render), compiled here from the hook's own
//! sources so that the fuzz targets and their smoke test run it natively.

#[allow(dead_code)]
#[path = "../../../hooks-wasm/template/src/parse.rs"]
mod parse;
#[allow(dead_code)]
#[path = "../../../hooks-wasm/template/src/render.rs"]
mod render;

use std::collections::BTreeMap;

use render::{Service, ServiceStub, Source, VarMeta};

/// Values a template can reach: a few env vars and variables, one of them listed, and two
/// registrations of one service.
struct Fixed;

impl Source for Fixed {
    fn env(&self, name: &str) -> Option<String> {
        match name {
            "NOMAD_TASK_NAME" => Some("web".into()),
            "PORT" => Some("8080".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn var(&self, path: &str) -> Result<Option<BTreeMap<String, String>>, String> {
        match path {
            "nomad/jobs/web" => Ok(Some(
                [("user", "admin"), ("pass", "s3cret"), ("a-b", "x")]
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .into(),
            )),
            "nomad/jobs/empty" => Ok(Some(BTreeMap::new())),
            "nomad/jobs/denied" => Err("permission denied".into()),
            _ => Ok(None),
        }
    }

    fn var_list(&self, prefix: &str) -> Result<Vec<VarMeta>, String> {
        Ok(["nomad/jobs/web", "nomad/jobs/empty"]
            .iter()
            .filter(|p| p.starts_with(prefix))
            .map(|p| VarMeta {
                namespace: "default".into(),
                path: p.to_string(),
                create_index: 1,
                modify_index: 2,
                create_time: 3,
                modify_time: 4,
            })
            .collect())
    }

    fn service(
        &self,
        name: &str,
        tag: Option<&str>,
        choose: Option<&(u32, String)>,
    ) -> Result<Vec<Service>, String> {
        if name == "denied" {
            return Err("permission denied".into());
        }
        let mut all: Vec<Service> = [("a", 8080, "v1"), ("b", 8081, "v2")]
            .iter()
            .filter(|_| name == "web")
            .filter(|(_, _, t)| tag.is_none_or(|w| w == *t))
            .map(|(id, port, t)| Service {
                id: id.to_string(),
                service_name: name.into(),
                namespace: "default".into(),
                address: "127.0.0.1".into(),
                port: *port,
                tags: vec![t.to_string()],
                ..Default::default()
            })
            .collect();
        if let Some((n, _)) = choose {
            all.truncate(*n as usize);
        }
        Ok(all)
    }

    fn file(&self, path: &str) -> Result<String, String> {
        match path {
            "local/conf" => Ok("a=1\n".into()),
            _ => Err("no such file".into()),
        }
    }

    fn now_ns(&self) -> i64 {
        1_700_000_000_000_000_000
    }

    fn services(&self) -> Result<Vec<ServiceStub>, String> {
        Ok(vec![ServiceStub {
            name: "web".into(),
            namespace: "default".into(),
            tags: vec!["v1".into(), "v2".into()],
        }])
    }
}

/// Input: `LEFT RIGHT FLAGS\n` on the first line (delimiters, then `m` for
/// `error_on_missing_key` and `e` for an env template), the template below it.
pub fn template(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (head, body) = text.split_once('\n').unwrap_or(("{{ }}", &text));
    let mut head = head.split(' ');
    let left = head.next().unwrap_or("{{");
    let right = head.next().unwrap_or("}}");
    let flags = head.next().unwrap_or("");
    let missing = flags.contains('m');
    match render::render(body, left, right, missing, &Fixed) {
        Ok(out) => {
            if flags.contains('e') {
                let _ = render::parse_env(&out);
            }
        }
        Err(e) => assert!(e.line >= 1, "an error names its line: {e:?}"),
    }
}
