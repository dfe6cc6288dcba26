//! Connecting by URL to a server that demands a password and TLS.

use strata_engine::{Commit, Engine, EngineError, KeyspaceSpec, Profile, Snapshot};
use strata_engine_postgres::testing::TestServer;
use strata_engine_postgres::{PostgresEngine, PostgresOptions};

/// A self-signed certificate and its key, made with the `openssl` tool.
fn certificate(dir: &std::path::Path) -> (Vec<u8>, Vec<u8>) {
    let (key, crt) = (dir.join("tls.key"), dir.join("tls.crt"));
    let status = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-keyout",
        ])
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("the openssl tool, to make a test certificate");
    assert!(status.success(), "openssl req failed");
    (std::fs::read(key).unwrap(), std::fs::read(crt).unwrap())
}

fn connector(crt: &[u8]) -> native_tls::TlsConnector {
    native_tls::TlsConnector::builder()
        .add_root_certificate(native_tls::Certificate::from_pem(crt).unwrap())
        // The certificate names `localhost`; the test connects to 127.0.0.1.
        .danger_accept_invalid_hostnames(true)
        .build()
        .unwrap()
}

/// The server accepts the role `app` only over TLS with its password. The
/// engine connects with a URL carrying the password and `sslmode=require`,
/// commits and reads; the session really is encrypted; a wrong password,
/// and a connection without TLS, are typed open errors.
#[test]
fn password_and_tls_by_url() {
    let server = TestServer::start_tcp(&[]).expect("a server on loopback");
    let scratch = server.socket_dir().join("certs");
    std::fs::create_dir_all(&scratch).unwrap();
    let (key, crt) = certificate(&scratch);
    server.write_private("server.key", &key).unwrap();
    server.write_private("server.crt", &crt).unwrap();
    for sql in [
        "ALTER SYSTEM SET ssl_cert_file = 'server.crt'",
        "ALTER SYSTEM SET ssl_key_file = 'server.key'",
        "ALTER SYSTEM SET ssl = on",
        "SELECT pg_reload_conf()",
        "CREATE ROLE app LOGIN PASSWORD 'correct horse'",
        "CREATE DATABASE appdb OWNER app",
    ] {
        server.admin(sql).unwrap();
    }
    server
        .hba_first(&[
            "hostssl all app 127.0.0.1/32 scram-sha-256",
            "host all app 127.0.0.1/32 reject",
        ])
        .unwrap();
    let port = server.port();
    let specs = || vec![KeyspaceSpec::new("kv", Profile::PointLookup)];
    let url = format!("postgres://app:correct%20horse@127.0.0.1:{port}/appdb?sslmode=require");
    let e = PostgresEngine::open_tls(
        url.parse().unwrap(),
        connector(&crt),
        specs(),
        PostgresOptions::default(),
    )
    .expect("open over TLS with a password");
    let kv = e.keyspace("kv").unwrap();
    let v = e
        .commit(Commit::new().put(kv, b"k".to_vec(), b"v".to_vec()))
        .unwrap()
        .version;
    let s = e.snapshot().unwrap();
    assert_eq!(
        (s.version().unwrap(), s.get(kv, b"k").unwrap()),
        (v, Some(b"v".to_vec()))
    );
    drop(s);
    // The same connector and URL give an encrypted session.
    let mut raw = url
        .parse::<postgres::Config>()
        .unwrap()
        .connect(postgres_native_tls::MakeTlsConnector::new(connector(&crt)))
        .unwrap();
    let ssl: bool = raw
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(ssl, "the session is not encrypted");
    let wrong = format!("postgres://app:wrong@127.0.0.1:{port}/appdb?sslmode=require");
    let err = PostgresEngine::open_tls(
        wrong.parse().unwrap(),
        connector(&crt),
        specs(),
        PostgresOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, EngineError::Backend(_)), "{err:?}");
    let told = strata_engine::ErrorChain(&err).to_string();
    assert!(told.contains("password"), "{told}");
    let plain = format!("postgres://app:correct%20horse@127.0.0.1:{port}/appdb?sslmode=disable");
    let err = PostgresEngine::connect(&plain, specs(), PostgresOptions::default()).unwrap_err();
    assert!(matches!(err, EngineError::Backend(_)), "{err:?}");
}
