//! The real `skillcat serve` binary as a child process: started with given arguments and
//! environment, its address read from its JSON log, its log kept for inspection.

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct ServeProcess {
    child: Child,
    pub address: SocketAddr,
    log: Arc<Mutex<String>>,
    /// The threads that copy stdout and stderr into `log`; each ends when its pipe closes.
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl ServeProcess {
    /// Runs `skillcat <args>` with JSON logs (filtered by `rust_log`) and `env` on top of a clean
    /// environment; returns once it logs the address it serves on.
    pub fn start(args: &[&str], env: &[(&str, &str)], rust_log: &str) -> ServeProcess {
        let mut command = Command::new(env!("CARGO_BIN_EXE_skillcat"));
        command.args(args);
        Self::spawn(command, env, rust_log)
    }

    /// As [`start`](Self::start), in a user namespace of its own whose limit on inotify watches
    /// is `watches`: the kernel refuses its watches beyond that, exactly as at
    /// `fs.inotify.max_user_watches`, without touching the limit of any other process (the
    /// namespace's limit applies on top of the machine's, to this process alone).
    pub fn start_with_watch_limit(watches: u64, args: &[&str], env: &[(&str, &str)], rust_log: &str) -> ServeProcess {
        let mut command = Command::new("/usr/bin/unshare");
        command
            .args(["--user", "--map-root-user", "/bin/sh", "-c"])
            .arg(format!("echo {watches} > /proc/sys/user/max_inotify_watches && exec \"$0\" \"$@\""));
        command.arg(env!("CARGO_BIN_EXE_skillcat")).args(args);
        Self::spawn(command, env, rust_log)
    }

    /// The process id (that of `skillcat` itself, which replaces any wrapper).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn spawn(mut command: Command, env: &[(&str, &str)], rust_log: &str) -> ServeProcess {
        command
            .env_clear()
            .env("SKILLCAT_LOG_FORMAT", "json")
            .env("RUST_LOG", rust_log)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("start skillcat serve");
        let log = Arc::new(Mutex::new(String::new()));
        let (address_sender, address) = std::sync::mpsc::channel();
        let mut readers = Vec::new();
        for stream in [
            Box::new(child.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().expect("stderr")),
        ] {
            let log = Arc::clone(&log);
            let address_sender = address_sender.clone();
            readers.push(std::thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { return };
                    if let Ok(entry) = serde_json::from_str::<serde_json::Value>(&line)
                        && entry["message"] == "serving"
                        && let Some(address) = entry["address"].as_str().and_then(|a| a.parse::<SocketAddr>().ok())
                    {
                        let _ = address_sender.send(address);
                    }
                    let mut log = log.lock().expect("log");
                    log.push_str(&line);
                    log.push('\n');
                }
            }));
        }
        let address = match address.recv_timeout(Duration::from_secs(20)) {
            Ok(address) => address,
            Err(_) => {
                let _ = child.kill();
                let status = child.wait().expect("wait");
                panic!("skillcat serve did not start ({status}); its log:\n{}", log.lock().expect("log"));
            }
        };
        ServeProcess { child, address, log, readers }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// Everything it has logged so far.
    pub fn log(&self) -> String {
        self.log.lock().expect("log").clone()
    }

    /// Waits (at most 10 s) until `GET /readyz` answers 200.
    pub async fn ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let response = reqwest::get(self.url("/readyz")).await;
            if response.is_ok_and(|response| response.status() == 200) {
                return;
            }
            assert!(Instant::now() < deadline, "not ready in 10 s; log:\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends SIGTERM and waits (at most 15 s) for the process to exit; returns how it exited and
    /// its whole log.
    pub fn terminate(mut self) -> (ExitStatus, String) {
        let pid = rustix::process::Pid::from_child(&self.child);
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
        let deadline = Instant::now() + Duration::from_secs(15);
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            assert!(Instant::now() < deadline, "no exit 15 s after SIGTERM");
            std::thread::sleep(Duration::from_millis(10));
        };
        // The pipes close with the process: once the readers are done, the log is complete.
        for reader in self.readers.drain(..) {
            reader.join().expect("a log reader");
        }
        (status, self.log())
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
