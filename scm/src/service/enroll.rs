//! `ScmEnroll` on the enrollment port (`scm.enroll_addr`): a process without a certificate
//! redeems a join token for one. The only rozone service that serves callers without a
//! certificate, so it trusts nothing in the request but the token: the certificate's role
//! and id come from the redeemed token, its key from the signing request (whose signature
//! proves the caller holds it), and only its host names from the caller.
//!
//! Everything the request carries is checked, lengths first, before the token is spent;
//! a refused token changes nothing but the token (gone if it existed).

use std::sync::Arc;

use rozone_proto::scm as pb;
use rozone_proto::scm::scm_enroll_server::ScmEnroll;
use rozone_rpc::pki::{self, Ca, CERT_VALIDITY};
use tonic::{Request, Response, Status};

use crate::node::ScmNode;

/// Most host names a certificate may carry.
pub const MAX_HOSTS: usize = 16;
/// Longest host name (DNS's limit).
pub const MAX_HOST_LEN: usize = 253;
/// Longest signing request accepted (a P-256 request is ~250 bytes).
pub const MAX_CSR_LEN: usize = 4096;
/// Longest token text accepted.
pub const MAX_TOKEN_LEN: usize = 128;

pub struct EnrollService {
    pub node: Arc<ScmNode>,
    pub ca: Arc<Ca>,
}

/// A follower's not-leader refusal names the leader's *client* address; the leader's
/// enrollment address is not known here (SCMs of one ring may use different enrollment
/// ports, as a dev cluster's do on one host). So the hint is dropped: the refusal stays
/// retryable and the enrolling side moves on to the next address it was given.
fn without_hint(s: Status) -> Status {
    if rozone_rpc::leader_hint(&s).is_some() {
        rozone_rpc::not_leader(s.message(), None)
    } else {
        s
    }
}

fn check_lengths(r: &pb::EnrollRequest) -> Result<(), Status> {
    let bad = |m: String| Err(Status::invalid_argument(m));
    if r.token.len() > MAX_TOKEN_LEN {
        return bad(format!("token longer than {MAX_TOKEN_LEN} bytes"));
    }
    if r.csr_der.is_empty() || r.csr_der.len() > MAX_CSR_LEN {
        return bad(format!("csr_der must hold 1 to {MAX_CSR_LEN} bytes"));
    }
    if r.hosts.len() > MAX_HOSTS {
        return bad(format!("at most {MAX_HOSTS} hosts"));
    }
    if let Some(h) = r
        .hosts
        .iter()
        .find(|h| h.trim().is_empty() || h.len() > MAX_HOST_LEN)
    {
        return bad(format!(
            "host {h:?}: want a DNS name or IP of 1 to {MAX_HOST_LEN} bytes"
        ));
    }
    Ok(())
}

#[tonic::async_trait]
impl ScmEnroll for EnrollService {
    async fn enroll(
        &self,
        req: Request<pb::EnrollRequest>,
    ) -> Result<Response<pb::EnrollReply>, Status> {
        let r = req.into_inner();
        check_lengths(&r)?;
        pki::check_request(&r.csr_der, &r.hosts)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let who = self
            .node
            .redeem_join_token(&r.token)
            .await
            .map_err(|e| without_hint(e.into()))?;
        let cert_pem = self
            .ca
            .sign_request(&r.csr_der, who, &r.hosts, CERT_VALIDITY)
            .map_err(|e| Status::internal(format!("sign a certificate for {who}: {e}")))?;
        tracing::info!(%who, hosts = ?r.hosts, "certificate issued for a join token");
        Ok(Response::new(pb::EnrollReply {
            cert_pem,
            ca_pem: self.ca.cert_pem().to_string(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(hosts: &[&str]) -> pb::EnrollRequest {
        pb::EnrollRequest {
            token: "t".into(),
            csr_der: vec![1],
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
        }
    }

    #[test]
    fn a_followers_refusal_stays_retryable_without_a_client_port_hint() {
        let s = without_hint(rozone_rpc::not_leader(
            "not the leader",
            Some("10.0.0.2:9860"),
        ));
        assert_eq!(rozone_rpc::leader_hint(&s), None);
        assert!(rozone_rpc::is_retryable(&s));
        assert_eq!(s.message(), "not the leader");
        let s = without_hint(Status::permission_denied("no"));
        assert_eq!(s.code(), tonic::Code::PermissionDenied);
    }

    #[test]
    fn oversized_fields_are_refused_before_anything_else() {
        check_lengths(&req(&["a", "127.0.0.1"])).unwrap();
        let many: Vec<&str> = vec!["a"; MAX_HOSTS + 1];
        let long = "a".repeat(MAX_HOST_LEN + 1);
        for bad in [
            req(&many),
            req(&[""]),
            req(&[&long]),
            pb::EnrollRequest {
                token: "x".repeat(MAX_TOKEN_LEN + 1),
                ..req(&[])
            },
            pb::EnrollRequest {
                csr_der: vec![],
                ..req(&[])
            },
            pb::EnrollRequest {
                csr_der: vec![0; MAX_CSR_LEN + 1],
                ..req(&[])
            },
        ] {
            let e = check_lengths(&bad).unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument);
        }
    }
}
