//! How the gateway reaches its Redis: the URL (`redis://`, `rediss://`, `unix://`), TLS
//! certificates (`--redis-ca`, `--redis-cert`, `--redis-key`, the redis crate's rustls) and
//! credentials from the environment when the URL has none. Files are read and checked once,
//! at start, so that a wrong path or a file of the wrong kind stops the gateway naming the
//! flag and the file, instead of failing every connection later.

use std::path::{Path, PathBuf};

use redis::cluster::ClusterClientBuilder;
use redis::{Client, ClientTlsConfig, RedisResult, TlsCertificates};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The Redis user and password when the URL names none (as the dashboard and exporter).
pub const USER_ENV: &str = "RMQ_REDIS_USERNAME";
pub const PASSWORD_ENV: &str = "RMQ_REDIS_PASSWORD";

/// The TLS files given on the command line.
#[derive(Debug, Clone, Default)]
pub struct TlsFiles {
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// What every connection to the target is made with besides its URL.
#[derive(Clone, Default)]
pub struct Access {
    /// `None`: plain, or `rediss://` verified against the system's roots.
    tls: Option<TlsCertificates>,
    /// From the environment, for URLs without credentials.
    user: Option<(String, String)>,
}

impl Access {
    /// Checks the files against the URLs (TLS files need `rediss://`) and reads them.
    pub fn new(urls: &[String], files: &TlsFiles, env: impl Fn(&str) -> Option<String>) -> Result<Access, String> {
        let given = files.ca.is_some() || files.cert.is_some();
        if given && !urls.iter().all(|u| u.starts_with("rediss://")) {
            return Err("--redis-ca, --redis-cert and --redis-key are for TLS: give a rediss:// URL".into());
        }
        let tls = if given {
            let root_cert = files.ca.as_deref().map(|p| read_certificates("--redis-ca", p)).transpose()?;
            let client_tls = match (&files.cert, &files.key) {
                (Some(cert), Some(key)) => Some(ClientTlsConfig {
                    client_cert: read_certificates("--redis-cert", cert)?,
                    client_key: read_key("--redis-key", key)?,
                }),
                _ => None,
            };
            let certs = TlsCertificates { client_tls, root_cert };
            // The crate's own checks (trust anchors, key), here rather than at each connection.
            for url in urls {
                Client::build_with_tls(url.as_str(), certs.clone()).map_err(|e| format!("TLS to Redis: {e}"))?;
            }
            Some(certs)
        } else {
            None
        };
        let user = match (env(USER_ENV), env(PASSWORD_ENV)) {
            (_, None) => None,
            (u, Some(p)) => Some((u.filter(|u| !u.is_empty()).unwrap_or_else(|| "default".into()), p)),
        };
        Ok(Access { tls, user })
    }

    /// A client of one server; `user` (an access key's Redis user) before the environment's,
    /// the URL's before both.
    pub fn client(&self, url: &str, user: Option<&(String, String)>) -> RedisResult<Client> {
        let client = match &self.tls {
            Some(certs) => Client::build_with_tls(url, certs.clone())?,
            None => Client::open(url)?,
        };
        let info = client.get_connection_info();
        let from_env = self.user.as_ref().filter(|_| info.redis_settings().password().is_none());
        match user.or(from_env) {
            Some((u, p)) => {
                let settings = info.redis_settings().clone().set_username(u).set_password(p);
                // The connection info keeps its TLS parameters.
                Client::open(info.clone().set_redis_settings(settings))
            }
            None => Ok(client),
        }
    }

    /// A cluster client's builder for these seeds, with the certificates and the user.
    pub fn cluster(&self, seeds: &[String], user: Option<&(String, String)>) -> ClusterClientBuilder {
        let mut builder = ClusterClientBuilder::new(seeds.iter().map(String::as_str));
        if let Some(certs) = &self.tls {
            builder = builder.certs(certs.clone());
        }
        let seed_has_password =
            seeds.iter().any(|s| Client::open(s.as_str()).is_ok_and(|c| c.get_connection_info().redis_settings().password().is_some()));
        if let Some((u, p)) = user.or(self.user.as_ref().filter(|_| !seed_has_password)) {
            builder = builder.username(u).password(p);
        }
        builder
    }

    /// For the start-up message: how the connection is secured.
    pub fn describe(&self, urls: &[String]) -> &'static str {
        match (&self.tls, urls.iter().all(|u| u.starts_with("rediss://"))) {
            (_, false) => "",
            (None, true) => " over TLS (the system's CA certificates)",
            (Some(TlsCertificates { client_tls: None, .. }), true) => " over TLS",
            (Some(_), true) => " over TLS with a client certificate",
        }
    }
}

/// A PEM file of one or more certificates, read; an error names the flag and the file.
pub fn read_certificates(flag: &str, path: &Path) -> Result<Vec<u8>, String> {
    let pem = std::fs::read(path).map_err(|e| format!("cannot read {flag} {}: {e}", path.display()))?;
    match CertificateDer::pem_slice_iter(&pem).collect::<Result<Vec<_>, _>>() {
        Ok(certs) if !certs.is_empty() => Ok(pem),
        Ok(_) => Err(format!("{flag} {}: no certificate in it (expected PEM: -----BEGIN CERTIFICATE-----)", path.display())),
        Err(e) => Err(format!("{flag} {}: not a PEM certificate: {e}", path.display())),
    }
}

/// A PEM private key file (PKCS#8, PKCS#1 or SEC1), read.
pub fn read_key(flag: &str, path: &Path) -> Result<Vec<u8>, String> {
    let pem = std::fs::read(path).map_err(|e| format!("cannot read {flag} {}: {e}", path.display()))?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| format!("{flag} {}: no PEM private key in it ({e})", path.display()))?;
    Ok(pem)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn tls_files_need_a_rediss_url() {
        let files = TlsFiles { ca: Some("/nonexistent".into()), ..TlsFiles::default() };
        let e = Access::new(&["redis://127.0.0.1:6379".into()], &files, no_env).err().unwrap();
        assert!(e.contains("give a rediss:// URL"), "{e}");
        let e = Access::new(&["rediss://127.0.0.1:6379".into()], &files, no_env).err().unwrap();
        assert!(e.starts_with("cannot read --redis-ca /nonexistent: "), "{e}");
    }

    #[test]
    fn a_file_of_the_wrong_kind_is_named() {
        let dir = std::env::temp_dir().join(format!("rmq-gw-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "not a certificate\n").unwrap();
        let e = read_certificates("--redis-ca", &junk).err().unwrap();
        assert!(e.contains("--redis-ca") && e.contains("no certificate in it"), "{e}");
        let e = read_key("--redis-key", &junk).err().unwrap();
        assert!(e.contains("--redis-key") && e.contains("no PEM private key"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn credentials_from_the_environment_only_when_the_url_has_none() {
        let env = |k: &str| (k == PASSWORD_ENV).then(|| "from-env".to_string());
        let access = Access::new(&["redis://127.0.0.1:6379".into()], &TlsFiles::default(), env).unwrap();
        let c = access.client("redis://127.0.0.1:6379", None).unwrap();
        assert_eq!(c.get_connection_info().redis_settings().password(), Some("from-env"));
        assert_eq!(c.get_connection_info().redis_settings().username(), Some("default"));
        let c = access.client("redis://u:from-url@127.0.0.1:6379", None).unwrap();
        assert_eq!(c.get_connection_info().redis_settings().password(), Some("from-url"));
        let key_user = ("app".to_string(), "key-secret".to_string());
        let c = access.client("redis://127.0.0.1:6379", Some(&key_user)).unwrap();
        assert_eq!(c.get_connection_info().redis_settings().username(), Some("app"));
    }
}
