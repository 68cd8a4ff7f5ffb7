//! The mock's `alloc exec`: an echo shell the driver answers itself (a `session` plan), so
//! the host's session path is exercised without a host process.
//!
//! A line is statements split by `;`: `echo WORDS` prints the words, `exit [N]` ends the
//! session with N (else the last status), anything else prints `mock: NAME: not found` on
//! stderr with status 127. `sh -c SCRIPT` (any program named `sh` or `*/sh`) runs SCRIPT
//! and ends; `sh` alone reads lines from stdin until `exit` or the end of stdin; any other
//! command runs as one line and ends. With a terminal, typed bytes are echoed back as a
//! terminal's line discipline would, and a carriage return ends a line.

use serde::{Deserialize, Serialize};

use paddock_driver_sdk::{DriverError, ExecInput, ExecOutput, ExecRequest};

/// What the shell keeps between inputs.
#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    /// The line typed so far.
    line: String,
    /// The last statement's status.
    status: i32,
    /// Echo input back (a terminal).
    tty: bool,
}

impl State {
    fn output(
        &self,
        stdout: String,
        stderr: String,
        exited: Option<i32>,
    ) -> Result<ExecOutput, DriverError> {
        Ok(ExecOutput {
            stdout: stdout.into_bytes(),
            stderr: stderr.into_bytes(),
            state: serde_json::to_vec(self).map_err(|e| DriverError::failed(e.to_string()))?,
            exited,
        })
    }

    /// Run one line; `Some(code)` when it exits.
    fn run(&mut self, line: &str, out: &mut String, err: &mut String) -> Option<i32> {
        for stmt in line.split(';') {
            let words: Vec<&str> = stmt.split_whitespace().collect();
            match words.as_slice() {
                [] => {}
                ["echo", rest @ ..] => {
                    out.push_str(&rest.join(" "));
                    out.push('\n');
                    self.status = 0;
                }
                ["exit"] => return Some(self.status),
                ["exit", n, ..] => return Some(n.parse().unwrap_or(2)),
                [name, ..] => {
                    err.push_str(&format!("mock: {name}: not found\n"));
                    self.status = 127;
                }
            }
        }
        None
    }
}

fn is_shell(program: &str) -> bool {
    program == "sh" || program.ends_with("/sh")
}

/// The session's start: a script runs at once and ends; a bare shell waits for input.
pub fn start(req: &ExecRequest) -> Result<ExecOutput, DriverError> {
    let mut st = State {
        tty: req.tty,
        ..State::default()
    };
    let (mut out, mut err) = (String::new(), String::new());
    let script = match req.command.as_slice() {
        [] => {
            return Err(DriverError::InvalidConfig(vec![
                paddock_driver_sdk::FieldError::new("command", "an exec needs a command to run"),
            ]));
        }
        [sh] if is_shell(sh) => {
            let prompt = if st.tty { "$ " } else { "" };
            return st.output(prompt.into(), String::new(), None);
        }
        [sh, c, script, ..] if is_shell(sh) && c == "-c" => script.clone(),
        argv => argv.join(" "),
    };
    let code = st.run(&script, &mut out, &mut err).unwrap_or(st.status);
    st.output(out, err, Some(code))
}

/// The next input to a waiting shell.
pub fn step(state: &[u8], input: ExecInput) -> Result<ExecOutput, DriverError> {
    let mut st: State = serde_json::from_slice(state)
        .map_err(|e| DriverError::failed(format!("mock exec state: {e}")))?;
    let (mut out, mut err) = (String::new(), String::new());
    match input {
        ExecInput::Resize(_) => {}
        ExecInput::StdinClosed => {
            let status = st.status;
            return st.output(out, err, Some(status));
        }
        ExecInput::Stdin(bytes) => {
            for c in String::from_utf8_lossy(&bytes).chars() {
                match c {
                    '\r' | '\n' => {
                        if st.tty {
                            out.push_str("\r\n");
                        }
                        let line = std::mem::take(&mut st.line);
                        if let Some(code) = st.run(&line, &mut out, &mut err) {
                            return st.output(out, err, Some(code));
                        }
                        if st.tty {
                            out.push_str("$ ");
                        }
                    }
                    c => {
                        if st.tty {
                            out.push(c);
                        }
                        st.line.push(c);
                    }
                }
            }
        }
    }
    st.output(out, err, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(argv: &[&str], tty: bool) -> ExecRequest {
        ExecRequest {
            command: argv.iter().map(|s| s.to_string()).collect(),
            tty,
            env: vec![],
            task_dir: "/t".into(),
            user: String::new(),
        }
    }

    #[test]
    fn a_script_runs_and_ends_with_its_exit_code() {
        let o = start(&req(&["/bin/sh", "-c", "echo hi; exit 3"], false)).unwrap();
        assert_eq!(o.stdout, b"hi\n");
        assert_eq!(o.exited, Some(3));
        let o = start(&req(&["nope"], false)).unwrap();
        assert_eq!(o.stderr, b"mock: nope: not found\n");
        assert_eq!(o.exited, Some(127));
    }

    #[test]
    fn a_bare_shell_reads_lines_and_echoes_on_a_terminal() {
        let o = start(&req(&["sh"], true)).unwrap();
        assert_eq!((o.stdout.as_slice(), o.exited), (&b"$ "[..], None));
        let o = step(&o.state, ExecInput::Stdin(b"ec".to_vec())).unwrap();
        assert_eq!(o.stdout, b"ec");
        let o = step(&o.state, ExecInput::Stdin(b"ho a\r".to_vec())).unwrap();
        assert_eq!(o.stdout, b"ho a\r\na\n$ ");
        let o = step(&o.state, ExecInput::Stdin(b"exit 4\r".to_vec())).unwrap();
        assert_eq!(o.exited, Some(4));
        let o = start(&req(&["sh"], false)).unwrap();
        let o = step(&o.state, ExecInput::StdinClosed).unwrap();
        assert_eq!(o.exited, Some(0));
    }
}
