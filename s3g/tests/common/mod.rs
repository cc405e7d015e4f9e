//! A real dev cluster (`rozone dev up --detach`: real SCM, OM, datanode and gateway
//! processes with mutual TLS), an S3 user made with `rozone s3 getsecret`, and AWS SDK
//! clients pointed at the gateway. Stopped by `rozone dev down`, and every recorded pid
//! SIGKILLed on drop so a failed test leaves no daemon behind.
//!
//! The binaries are found next to `rozone-s3g` in cargo's target dir: build them first
//! (`cargo build -p rozone-client -p rozone-scm -p rozone-om -p rozone-datanode --bins`;
//! `cargo nextest run --workspace` builds every binary).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use aws_sdk_s3::config::{Credentials, Region, RequestChecksumCalculation};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};

pub fn bin_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_BIN_EXE_rozone-s3g"))
        .parent()
        .expect("a parent dir")
        .to_path_buf();
    for b in ["rozone", "rozone-scm", "rozone-om", "rozone-datanode"] {
        assert!(
            dir.join(b).is_file(),
            "{b} not found in {}: cargo build -p rozone-client -p rozone-scm -p rozone-om -p rozone-datanode --bins",
            dir.display()
        );
    }
    dir
}

/// `rozone` with a hermetic environment.
pub fn rozone() -> Command {
    let mut c = Command::new(bin_dir().join("rozone"));
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("ROZONE_") {
            c.env_remove(k);
        }
    }
    c.env_remove("RUST_LOG");
    c.stdin(Stdio::null());
    c
}

fn ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub endpoint: String,
    pids: Vec<i32>,
}

impl Cluster {
    /// One SCM, one OM, three datanodes and the gateway.
    pub fn up() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("rozone-s3")
            .tempdir()
            .expect("temp dir");
        let out = ok(rozone()
            .args(["--json", "dev", "up", "--detach", "--ready-timeout", "120s"])
            .args(["--scms", "1", "--oms", "1", "--datanodes", "3", "--bin-dir"])
            .arg(bin_dir())
            .arg("--dir")
            .arg(dir.path()));
        let v: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        let endpoint = v["s3_endpoint"]
            .as_str()
            .unwrap_or_else(|| panic!("no s3_endpoint in {out}"))
            .to_string();
        let pids = v["pids"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|p| p["pid"].as_i64())
                    .map(|p| p as i32)
                    .collect()
            })
            .unwrap_or_default();
        let toml = std::fs::read_to_string(dir.path().join("client.toml")).expect("client.toml");
        assert!(
            toml.contains(&format!("s3_endpoint = \"{endpoint}\"")),
            "{toml}"
        );
        Self {
            dir,
            endpoint,
            pids,
        }
    }

    /// `http://127.0.0.1:PORT` of the gateway's `/health`, `/ready` and `/metrics`, from the
    /// cluster's `cluster.json`.
    pub fn gateway_http(&self) -> String {
        let text =
            std::fs::read_to_string(self.dir.path().join("cluster.json")).expect("cluster.json");
        let v: serde_json::Value = serde_json::from_str(&text).expect("cluster.json is JSON");
        let port = v["nodes"]
            .as_array()
            .and_then(|n| n.iter().find(|n| n["kind"] == "s3g"))
            .and_then(|n| n["http"].as_u64())
            .unwrap_or_else(|| panic!("no s3g node in {text}"));
        format!("http://127.0.0.1:{port}")
    }

    /// `rozone --config client.toml ARGS`, its stdout.
    pub fn cli(&self, args: &[&str]) -> String {
        ok(rozone()
            .arg("--config")
            .arg(self.dir.path().join("client.toml"))
            .args(args))
    }

    /// `rozone s3 getsecret --user U`: (access key, secret) from its `awsAccessKey=` and
    /// `awsSecret=` lines.
    pub fn secret(&self, user: &str) -> (String, String) {
        let out = self.cli(&["s3", "getsecret", "--user", user]);
        let get = |k: &str| {
            out.lines()
                .find_map(|l| l.strip_prefix(k))
                .unwrap_or_else(|| panic!("no {k} in {out}"))
                .to_string()
        };
        (get("awsAccessKey="), get("awsSecret="))
    }

    /// An SDK client signing with `ak`/`sk`, path-style, plaintext HTTP.
    pub fn s3(&self, ak: &str, sk: &str) -> aws_sdk_s3::Client {
        let conf = aws_sdk_s3::Config::builder()
            .behavior_version_latest()
            .region(Region::new("us-east-1"))
            .endpoint_url(&self.endpoint)
            .credentials_provider(Credentials::new(ak, sk, None, None, "test"))
            .force_path_style(true)
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .http_client(aws_smithy_http_client::Builder::new().build_http())
            .timeout_config(
                aws_sdk_s3::config::timeout::TimeoutConfig::builder()
                    .operation_timeout(Duration::from_secs(120))
                    .build(),
            )
            .build();
        aws_sdk_s3::Client::from_conf(conf)
    }

    /// A client of a fresh user.
    pub fn user(&self, name: &str) -> aws_sdk_s3::Client {
        let (ak, sk) = self.secret(name);
        self.s3(&ak, &sk)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = rozone()
            .args(["dev", "down", "--dir"])
            .arg(self.dir.path())
            .output();
        for p in &self.pids {
            // SAFETY: kill(2) of a pid this test started; a reused pid is not ours to
            // worry about after `dev down` (it stopped them all).
            unsafe { libc::kill(*p, libc::SIGKILL) };
        }
    }
}

/// The AWS error code of a failed call, or the whole error when it has none.
pub fn code<E, R>(e: &SdkError<E, R>) -> String
where
    SdkError<E, R>: ProvideErrorMetadata + std::fmt::Debug,
{
    ProvideErrorMetadata::code(e)
        .map(str::to_string)
        .unwrap_or_else(|| format!("{e:?}"))
}

/// The HTTP status of a failed call, when it got one.
pub fn status<E>(e: &SdkError<E, aws_sdk_s3::config::http::HttpResponse>) -> Option<u16> {
    e.raw_response().map(|r| r.status().as_u16())
}

/// One HTTP/1.1 request over a plain socket (for presigned URLs and anonymous calls, which
/// must work without the SDK's signing): (status, body).
pub fn http(method: &str, url: &str, headers: &[(String, String)], body: &[u8]) -> (u16, Vec<u8>) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let mut s = std::net::TcpStream::connect(host).expect("connect");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        if !k.eq_ignore_ascii_case("host") && !k.eq_ignore_ascii_case("content-length") {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let head_end = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete response head");
    let head = String::from_utf8_lossy(&out[..head_end]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head}"));
    let mut body = out[head_end + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body);
    }
    (status, body)
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size_text = String::from_utf8_lossy(&b[..eol]).into_owned();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or(0);
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + size]);
        b = &b[eol + 2 + size + 2..];
    }
}

/// Deterministic bytes of length `n` (no two blocks alike).
pub fn data(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
