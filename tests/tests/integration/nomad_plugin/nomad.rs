//! Nomad's side of the plugin, as its client does it: start the binary with the go-plugin
//! environment, read the handshake line, dial the Unix socket over h2c, call the services.
//! Config goes as cty msgpack, as Nomad encodes it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use paddock_nomad_driver::proto::base::base_plugin_client::BasePluginClient;
use paddock_nomad_driver::proto::drivers as pb;
use paddock_nomad_driver::proto::drivers::driver_client::DriverClient;
use paddock_nomad_driver::proto::plugin::grpc_controller_client::GrpcControllerClient;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tonic::transport::Channel;

/// The plugin binary cargo built for these tests.
pub fn plugin_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_paddock-nomad-driver"))
}

/// A running plugin process and a connection to it.
pub struct Plugin {
    pub child: tokio::process::Child,
    pub line: String,
    /// Where it listens (from the handshake line).
    #[allow(dead_code)]
    pub socket: PathBuf,
    pub channel: Channel,
    pub stderr: tokio::task::JoinHandle<String>,
}

/// Start `bin` as Nomad does (its cookie, `PLUGIN_PROTOCOL_VERSIONS`, the port range) and
/// connect once the handshake line is read.
pub async fn launch_as(bin: &Path, versions: &str) -> Plugin {
    let mut child = tokio::process::Command::new(bin)
        .env(
            paddock_nomad_driver::handshake::MAGIC_COOKIE_KEY,
            paddock_nomad_driver::handshake::MAGIC_COOKIE_VALUE,
        )
        .env("PLUGIN_PROTOCOL_VERSIONS", versions)
        .env("PLUGIN_MIN_PORT", "10000")
        .env("PLUGIN_MAX_PORT", "25000")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), stdout.next_line())
        .await
        .expect("no handshake line within 60 s")
        .unwrap()
        .expect("stdout closed before the handshake line");
    // Anything printed later on stdout is drained (go-plugin ignores it).
    tokio::spawn(async move { while let Ok(Some(_)) = stdout.next_line().await {} });
    let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
    let stderr = tokio::spawn(async move {
        let mut all = String::new();
        while let Ok(Some(l)) = err.next_line().await {
            all.push_str(&l);
            all.push('\n');
        }
        all
    });
    let fields: Vec<&str> = line.split('|').collect();
    assert_eq!(fields.len(), 6, "handshake line {line:?}");
    assert_eq!(fields[0], "1", "core protocol version in {line:?}");
    assert_eq!(fields[2], "unix", "network in {line:?}");
    assert_eq!(fields[4], "grpc", "protocol in {line:?}");
    let socket = PathBuf::from(fields[3]);
    let channel = connect(&socket).await;
    Plugin {
        child,
        line,
        socket,
        channel,
        stderr,
    }
}

/// [`launch_as`] with the binary as built, asking for protocol version 2 as Nomad does.
pub async fn launch() -> Plugin {
    launch_as(&plugin_bin(), "2").await
}

/// An h2c channel over the plugin's Unix socket.
pub async fn connect(socket: &Path) -> Channel {
    paddock_nomad_driver::client::connect_unix(socket)
        .await
        .unwrap()
}

impl Plugin {
    pub fn base(&self) -> BasePluginClient<Channel> {
        BasePluginClient::new(self.channel.clone())
    }

    pub fn driver(&self) -> DriverClient<Channel> {
        DriverClient::new(self.channel.clone())
    }

    /// SetConfig with `config` (JSON) as Nomad encodes the agent's plugin block.
    pub async fn set_config(&self, config: &Value) -> Result<(), tonic::Status> {
        self.base()
            .set_config(paddock_nomad_driver::proto::base::SetConfigRequest {
                msgpack_config: paddock_nomad_driver::cty::from_json(
                    config,
                    paddock_nomad_driver::spec::PLUGIN_CONFIG_KEYS,
                ),
                nomad_config: Some(paddock_nomad_driver::proto::base::NomadConfig {
                    driver: Some(paddock_nomad_driver::proto::base::NomadDriverConfig {
                        client_max_port: 25000,
                        client_min_port: 10000,
                        topology: None,
                    }),
                }),
                plugin_api_version: "v0.1.0".into(),
            })
            .await
            .map(|_| ())
    }

    /// go-plugin's Shutdown, then the exit status within `within`.
    pub async fn shutdown(mut self, within: Duration) -> std::process::ExitStatus {
        GrpcControllerClient::new(self.channel.clone())
            .shutdown(paddock_nomad_driver::proto::plugin::Empty {})
            .await
            .unwrap();
        tokio::time::timeout(within, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("the plugin did not exit within {within:?} of Shutdown"))
            .unwrap()
    }

    /// kill -9, as when the plugin crashes.
    pub async fn kill(mut self) -> String {
        self.child.kill().await.unwrap();
        let _ = self.child.wait().await;
        self.stderr.await.unwrap_or_default()
    }
}

/// A task config as Nomad's task runner sends it.
pub fn task(alloc: &str, name: &str, config: &Value, alloc_dir: &Path) -> pb::TaskConfig {
    pb::TaskConfig {
        id: format!("{alloc}/{name}/{}", &uuid_ish()),
        name: name.into(),
        msgpack_driver_config: paddock_nomad_driver::cty::from_json(config, &[]),
        env: [
            ("NOMAD_ALLOC_ID".to_string(), alloc.to_string()),
            ("NOMAD_TASK_NAME".to_string(), name.to_string()),
        ]
        .into(),
        alloc_dir: alloc_dir.display().to_string(),
        stdout_path: "/dev/null".into(),
        stderr_path: "/dev/null".into(),
        task_group_name: "g".into(),
        job_name: "j".into(),
        job_id: "j".into(),
        alloc_id: alloc.into(),
        namespace: "default".into(),
        node_name: "n1".into(),
        node_id: "node-1".into(),
        ..Default::default()
    }
}

fn uuid_ish() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{:08x}",
        N.fetch_add(1, Ordering::SeqCst) + u64::from(std::process::id()) * 1000
    )
}

/// Start a task and return its handle.
pub async fn start(p: &Plugin, t: pb::TaskConfig) -> Result<pb::TaskHandle, tonic::Status> {
    p.driver()
        .start_task(pb::StartTaskRequest { task: Some(t) })
        .await
        .map(|r| r.into_inner().handle.expect("a started task has a handle"))
}

/// WaitTask, bounded.
pub async fn wait(p: &Plugin, task_id: &str, within: Duration) -> pb::WaitTaskResponse {
    tokio::time::timeout(
        within,
        p.driver().wait_task(pb::WaitTaskRequest {
            task_id: task_id.into(),
        }),
    )
    .await
    .unwrap_or_else(|_| panic!("WaitTask on {task_id} did not answer within {within:?}"))
    .unwrap()
    .into_inner()
}

/// InspectTask's status of a task.
pub async fn inspect(p: &Plugin, task_id: &str) -> pb::TaskStatus {
    p.driver()
        .inspect_task(pb::InspectTaskRequest {
            task_id: task_id.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .task
        .unwrap()
}
