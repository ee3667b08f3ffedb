//! The listener's TLS (`--tls-cert`, `--tls-key`): a rustls server configuration read once
//! at start, so a wrong file stops the gateway naming it. The crypto is rustls' ring, the
//! one provider its features enable (Cargo.toml), which rustls then installs by itself —
//! for the redis crate's connections too.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use crate::redis_client::{read_certificates, read_key};

/// An acceptor serving the certificate chain of `cert` with the key of `key`.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    let chain = CertificateDer::pem_slice_iter(&read_certificates("--tls-cert", cert)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--tls-cert {}: {e}", cert.display()))?;
    let key_der = PrivateKeyDer::from_pem_slice(&read_key("--tls-key", key)?).map_err(|e| format!("--tls-key {}: {e}", key.display()))?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| format!("--tls-cert {} with --tls-key {}: {e}", cert.display(), key.display()))?;
    // HTTP/1.1 is what the gateway serves (and what the SQS SDKs speak).
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
