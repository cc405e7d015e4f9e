//! Mutual TLS and authorization by role on a real dev cluster (real daemons, real gRPC):
//! for every gRPC port, a caller without a certificate, one presenting a certificate of
//! another CA, and one with a certificate of the cluster CA but the wrong role or node id
//! is refused, and the cluster's state is unchanged. The callers are built here from
//! tonic and the `rozone-rpc` factory, exactly as an attacker with network access could.
//!
//! On cd62657 none of this existed (no CA, no certificates, plaintext ports): that commit's
//! failure on the same calls is shown by `security_plaintext.rs`, which fails there.

mod common;
#[path = "security/join.rs"]
mod join;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use rozone_proto::datanode as dpb;
use rozone_proto::om as opb;
use rozone_proto::raft::{FetchSnapshotRequest, RaftRequest};
use rozone_proto::scm as spb;
use rozone_rpc::{pki, Caller, ChannelFactory, Role, Security};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::{Code, Status};

const DAY: Duration = Duration::from_secs(86_400);

/// Certificates a test caller can present.
struct Certs {
    cluster_ca: PathBuf,
    out: tempfile::TempDir,
}

impl Certs {
    fn new(c: &DevCluster) -> Self {
        Self {
            cluster_ca: c.dir.path().join("tls").join("ca"),
            out: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// A certificate of the cluster CA for `role`-`id`.
    fn cluster(&self, role: Role, id: u64) -> Security {
        let dir = self.out.path().join("cluster");
        let i = pki::issue(&self.cluster_ca, Caller { role, id }, &[], &dir, DAY).expect("issue");
        Security::load(&i.ca_cert, &i.cert, &i.key).expect("load")
    }

    /// The cluster's client config, presenting a new certificate for `role`-`id`.
    fn client_config(&self, c: &DevCluster, role: Role, id: u64) -> rozone_client::ClientConfig {
        let dir = self.out.path().join(format!("{role}-{id}"));
        let i = pki::issue(&self.cluster_ca, Caller { role, id }, &[], &dir, DAY).expect("issue");
        let mut cfg = c.client_config();
        cfg.ca_cert = Some(i.ca_cert);
        cfg.cert = Some(i.cert);
        cfg.key = Some(i.key);
        cfg
    }

    /// TLS that trusts the cluster CA, presenting `identity` (none: no certificate).
    fn tls(&self, identity: Option<(PathBuf, PathBuf)>) -> ClientTlsConfig {
        let ca = std::fs::read(self.cluster_ca.join(pki::CA_CERT)).expect("ca");
        let mut t = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca));
        if let Some((cert, key)) = identity {
            let (c, k) = (std::fs::read(cert).unwrap(), std::fs::read(key).unwrap());
            t = t.identity(Identity::from_pem(c, k));
        }
        t
    }

    /// A certificate from another CA (same role and id as a real member).
    fn foreign(&self) -> (PathBuf, PathBuf) {
        let ca = self.out.path().join("other-ca");
        if !ca.join(pki::CA_CERT).exists() {
            pki::init_ca(&ca).expect("other CA");
        }
        let who = Caller {
            role: Role::Admin,
            id: 1,
        };
        let i = pki::issue(&ca, who, &[], &self.out.path().join("foreign"), DAY).expect("issue");
        (i.cert, i.key)
    }
}

/// The ports of the first daemon of `kind` (`client`, `peer`, `extra`).
fn port(dir: &Path, kind: &str, field: &str) -> String {
    let text = std::fs::read_to_string(dir.join("cluster.json")).expect("cluster.json");
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    let p = v["nodes"]
        .as_array()
        .and_then(|ns| ns.iter().find(|n| n["kind"] == kind))
        .and_then(|n| n[field].as_u64())
        .unwrap_or_else(|| panic!("no {kind} {field}"));
    format!("127.0.0.1:{p}")
}

async fn tls_channel(addr: &str, tls: ClientTlsConfig) -> Result<Channel, String> {
    Endpoint::from_shared(format!("https://{addr}"))
        .map_err(|e| e.to_string())?
        .tls_config(tls)
        .map_err(|e| e.to_string())?
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| format!("connect: {e}"))
}

/// Which service a port carries, and a cheap call to probe it.
#[derive(Clone, Copy, Debug)]
enum Probe {
    ScmAdmin,
    OmAdmin,
    Raft,
    Snapshot,
    Container,
    Replication,
}

fn raft_req(group: &str, target: u64, from: u64) -> RaftRequest {
    RaftRequest {
        group_id: group.into(),
        target,
        from,
        payload: vec![0; 8],
        ..Default::default()
    }
}

async fn probe(p: Probe, ch: Channel) -> Result<(), Status> {
    use rozone_proto::datanode::container_client::ContainerClient;
    use rozone_proto::datanode::replication_client::ReplicationClient;
    use rozone_proto::raft::raft_service_client::RaftServiceClient;
    use rozone_proto::raft::snapshot_service_client::SnapshotServiceClient;
    match p {
        Probe::ScmAdmin => {
            let c = &mut rozone_proto::scm::scm_admin_client::ScmAdminClient::new(ch);
            c.roles(spb::RingInfoRequest {}).await.map(|_| ())
        }
        Probe::OmAdmin => {
            let c = &mut rozone_proto::om::om_admin_client::OmAdminClient::new(ch);
            c.roles(opb::RolesRequest::default()).await.map(|_| ())
        }
        Probe::Raft => RaftServiceClient::new(ch)
            .vote(raft_req("x", 1, 1))
            .await
            .map(|_| ()),
        Probe::Snapshot => SnapshotServiceClient::new(ch)
            .fetch_snapshot(FetchSnapshotRequest::default())
            .await
            .map(|_| ()),
        Probe::Container => ContainerClient::new(ch)
            .get_container(dpb::GetContainerRequest { container_id: 1 })
            .await
            .map(|_| ()),
        Probe::Replication => ReplicationClient::new(ch)
            .pull_container(dpb::PullContainerRequest { container_id: 1 })
            .await
            .map(|_| ()),
    }
}

/// The call fails before any handler looks at it: at the TLS handshake (a connect error,
/// or the first call on the connection failing with a transport error).
async fn refused_by_transport(what: &str, ch: Result<Channel, String>, p: Probe) {
    let Ok(ch) = ch else { return };
    match probe(p, ch).await {
        Ok(()) => panic!("{what}: answered"),
        Err(s) => assert!(
            // tonic reports a refused handshake or a reset connection as one of these
            // (h2 errors as INTERNAL): never a handler's answer.
            matches!(
                s.code(),
                Code::Unavailable | Code::Unknown | Code::Cancelled | Code::Internal
            ),
            "{what}: reached a handler: {:?} {}",
            s.code(),
            s.message()
        ),
    }
}

fn denied<T: std::fmt::Debug>(what: &str, r: Result<T, Status>, want: &str) {
    match r {
        Ok(v) => panic!("{what}: accepted: {v:?}"),
        Err(s) => {
            assert_eq!(s.code(), Code::PermissionDenied, "{what}: {}", s.message());
            assert!(
                s.message().contains(want),
                "{what}: {:?} lacks {want:?}",
                s.message()
            );
        }
    }
}

/// One cluster for every check: each `dev up` costs nine processes on two cores.
#[test]
fn every_port_refuses_callers_without_a_cluster_certificate_of_the_right_role() {
    let c = DevCluster::up(&[]);
    transport_refusals(&c);
    wrong_roles_and_ids_are_denied_and_change_nothing(&c);
    users_change_only_what_they_own(&c);
    the_cli_without_a_certificate_says_how_to_get_one(&c);
    join::join_tokens_give_certificates_once(&c);
}

/// Plaintext, no certificate, another CA's certificate: refused on every port.
fn transport_refusals(c: &DevCluster) {
    let certs = Certs::new(c);
    let d = c.dir.path();
    let ports = [
        ("SCM client", port(d, "scm", "client"), Probe::ScmAdmin),
        ("SCM peer", port(d, "scm", "peer"), Probe::Raft),
        ("SCM checkpoint", port(d, "scm", "extra"), Probe::Snapshot),
        ("OM client", port(d, "om", "client"), Probe::OmAdmin),
        ("OM peer", port(d, "om", "peer"), Probe::Raft),
        (
            "datanode container",
            port(d, "datanode", "client"),
            Probe::Container,
        ),
        ("datanode raft", port(d, "datanode", "peer"), Probe::Raft),
        (
            "datanode replication",
            port(d, "datanode", "extra"),
            Probe::Replication,
        ),
    ];
    let before = (
        c.json(&["admin", "om", "roles"]),
        c.json(&["admin", "scm", "roles"]),
    );
    let rt = runtime();
    rt.block_on(async {
        for (name, addr, p) in &ports {
            let plain = ChannelFactory::insecure()
                .connect(addr)
                .await
                .map_err(|e| e.to_string());
            refused_by_transport(&format!("{name}: plaintext"), plain, *p).await;
            let none = tls_channel(addr, certs.tls(None)).await;
            refused_by_transport(&format!("{name}: no certificate"), none, *p).await;
            let other = tls_channel(addr, certs.tls(Some(certs.foreign()))).await;
            refused_by_transport(&format!("{name}: another CA's certificate"), other, *p).await;
        }
    });
    let after = (
        c.json(&["admin", "om", "roles"]),
        c.json(&["admin", "scm", "roles"]),
    );
    assert_eq!(before.0["members"], after.0["members"]);
    assert_eq!(before.1["members"], after.1["members"]);
}

/// A certificate of the cluster CA with the wrong role or id: PERMISSION_DENIED naming
/// both, before anything changes.
fn wrong_roles_and_ids_are_denied_and_change_nothing(c: &DevCluster) {
    use rozone_proto::datanode::container_client::ContainerClient;
    use rozone_proto::datanode::pipeline_data_client::PipelineDataClient;
    use rozone_proto::datanode::replication_client::ReplicationClient;
    use rozone_proto::om::om_admin_client::OmAdminClient;
    use rozone_proto::raft::raft_service_client::RaftServiceClient;
    use rozone_proto::raft::snapshot_service_client::SnapshotServiceClient;
    use rozone_proto::ring::ring_client::RingClient;
    use rozone_proto::scm::scm_admin_client::ScmAdminClient;
    use rozone_proto::scm::scm_block_client::ScmBlockClient;
    use rozone_proto::scm::scm_datanode_client::ScmDatanodeClient;

    let certs = Certs::new(c);
    let d = c.dir.path();
    let (scm, scm_peer, scm_cp) = (
        port(d, "scm", "client"),
        port(d, "scm", "peer"),
        port(d, "scm", "extra"),
    );
    let (om, om_peer) = (port(d, "om", "client"), port(d, "om", "peer"));
    let (dn, dn_raft, dn_repl) = (
        port(d, "datanode", "client"),
        port(d, "datanode", "peer"),
        port(d, "datanode", "extra"),
    );
    let client = certs.cluster(Role::Client, 7).channels();
    let admin = certs.cluster(Role::Admin, 8).channels();
    let om2 = certs.cluster(Role::Om, 2).channels();
    let dn9 = certs.cluster(Role::Datanode, 9).channels();
    let scm5 = certs.cluster(Role::Scm, 5).channels();
    let om_before = c.json(&["admin", "om", "roles"]);
    let safe_before = c.json(&["admin", "safemode", "status"]);
    assert_eq!(safe_before["forced_exit"], false, "{safe_before}");
    let pipelines_before = c.json(&["admin", "pipeline", "list"]);

    let rt = runtime();
    rt.block_on(async {
        let ch = |f: &ChannelFactory, a: &str| f.lazy(a).expect("channel");
        // SCM client port: block deletion (issue 15) and allocation are for OMs, admin RPCs
        // for admins, the datanode protocol for that datanode.
        let blocks = vec![spb::BlockId {
            container_id: 1,
            local_id: 1,
        }];
        denied(
            "DeleteBlocks as a client",
            ScmBlockClient::new(ch(&client, &scm))
                .delete_blocks(spb::DeleteBlocksRequest {
                    blocks: blocks.clone(),
                })
                .await,
            "DeleteBlocks is for om/admin certificates; the caller is client-7",
        );
        denied(
            "DeleteBlocks as a datanode",
            ScmBlockClient::new(ch(&dn9, &scm))
                .delete_blocks(spb::DeleteBlocksRequest { blocks })
                .await,
            "the caller is datanode-9",
        );
        denied(
            "AllocateBlock as a client",
            ScmBlockClient::new(ch(&client, &scm))
                .allocate_block(spb::AllocateBlockRequest::default())
                .await,
            "AllocateBlock is for om certificates",
        );
        denied(
            "Heartbeat for datanode 1 as datanode 9",
            ScmDatanodeClient::new(ch(&dn9, &scm))
                .heartbeat(spb::HeartbeatRequest {
                    datanode_id: 1,
                    ..Default::default()
                })
                .await,
            "Heartbeat as datanode-1 needs that node's certificate; the caller is datanode-9",
        );
        denied(
            "Register as datanode 1 with an OM certificate",
            ScmDatanodeClient::new(ch(&om2, &scm))
                .register(spb::RegisterRequest {
                    datanode: Some(spb::DatanodeDetails {
                        id: 1,
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .await,
            "the caller is om-2",
        );
        denied(
            "ForceExitSafeMode as a client",
            ScmAdminClient::new(ch(&client, &scm))
                .force_exit_safe_mode(spb::ForceExitSafeModeRequest::default())
                .await,
            "ForceExitSafeMode is for admin certificates",
        );
        denied(
            "CloseContainer as an OM",
            ScmAdminClient::new(ch(&om2, &scm))
                .close_container(spb::CloseContainerRequest { container_id: 1 })
                .await,
            "CloseContainer is for admin certificates",
        );
        denied(
            "TransferLeader of the SCM ring as a client",
            ScmAdminClient::new(ch(&client, &scm))
                .transfer_leader(spb::TransferLeaderRequest { node_id: 2 })
                .await,
            "TransferLeader is for admin certificates",
        );
        denied(
            "AddMember to the SCM ring for node 8 as SCM 5",
            RingClient::new(ch(&scm5, &scm))
                .add_member(rozone_proto::ring::AddMemberRequest {
                    id: 8,
                    peer_addr: "127.0.0.1:1".into(),
                    client_addr: "127.0.0.1:2".into(),
                    ..Default::default()
                })
                .await,
            "AddMember as scm-8 needs that node's certificate; the caller is scm-5",
        );
        // SCM peer and checkpoint ports: only SCM ring members, each as itself.
        denied(
            "SCM vote as an OM",
            RaftServiceClient::new(ch(&om2, &scm_peer))
                .vote(raft_req("scm", 1, 2))
                .await,
            "raft vote as scm-2 needs that node's certificate; the caller is om-2",
        );
        denied(
            "SCM vote from node 1 with SCM 5's certificate",
            RaftServiceClient::new(ch(&scm5, &scm_peer))
                .vote(raft_req("scm", 1, 1))
                .await,
            "the caller is scm-5",
        );
        denied(
            "SCM checkpoint download as a client",
            SnapshotServiceClient::new(ch(&client, &scm_cp))
                .fetch_snapshot(FetchSnapshotRequest {
                    group_id: "scm".into(),
                    snapshot_id: String::new(),
                })
                .await,
            "snapshot download is for scm certificates",
        );
        // OM client port: AddMember{force} (issue 15) only for admins or the joining OM
        // itself; leadership and membership changes only for admins.
        let add = |id| rozone_proto::ring::AddMemberRequest {
            id,
            peer_addr: "127.0.0.1:1".into(),
            client_addr: "127.0.0.1:2".into(),
            force: true,
            ..Default::default()
        };
        denied(
            "AddMember{force} as a client",
            RingClient::new(ch(&client, &om)).add_member(add(9)).await,
            "AddMember as om-9 needs that node's certificate; the caller is client-7",
        );
        denied(
            "AddMember{force} for node 9 as OM 2",
            RingClient::new(ch(&om2, &om)).add_member(add(9)).await,
            "the caller is om-2",
        );
        denied(
            "OM Decommission as an OM",
            OmAdminClient::new(ch(&om2, &om))
                .decommission(opb::DecommissionRequest { node_id: 3 })
                .await,
            "Decommission is for admin certificates",
        );
        denied(
            "OM TransferLeader as a client",
            OmAdminClient::new(ch(&client, &om))
                .transfer_leader(opb::TransferLeaderRequest { node_id: 2 })
                .await,
            "TransferLeader is for admin certificates",
        );
        // OM peer port: the forged snapshot offer (issue 15), from an outsider and from a
        // member speaking for another.
        denied(
            "InstallSnapshot to an OM as a client",
            RaftServiceClient::new(ch(&client, &om_peer))
                .install_snapshot(raft_req("om", 1, 7))
                .await,
            "raft snapshot offer as om-7 needs that node's certificate; the caller is client-7",
        );
        denied(
            "InstallSnapshot to an OM from node 3 with OM 2's certificate",
            RaftServiceClient::new(ch(&om2, &om_peer))
                .install_snapshot(raft_req("om", 1, 3))
                .await,
            "the caller is om-2",
        );
        // Datanode ports: chunk I/O for data clients, pipeline and replication traffic for
        // datanodes.
        denied(
            "ReadChunk as an OM",
            ContainerClient::new(ch(&om2, &dn))
                .read_chunk(dpb::ReadChunkRequest::default())
                .await,
            "container I/O is for client/admin/s3g certificates; the caller is om-2",
        );
        // A container's descriptor and block list are for operators: a data client holds
        // tokens for its own blocks only and may not map the rest. Run against the datanode
        // of 8948c2b, the client's GetContainer was answered (CONTAINER_NOT_FOUND, not
        // PERMISSION_DENIED).
        denied(
            "GetContainer as a client",
            ContainerClient::new(ch(&client, &dn))
                .get_container(dpb::GetContainerRequest { container_id: 1 })
                .await,
            "container metadata is for admin certificates; the caller is client-7",
        );
        denied(
            "ListBlocks as a client",
            ContainerClient::new(ch(&client, &dn))
                .list_blocks(dpb::ListBlocksRequest {
                    container_id: 1,
                    ..Default::default()
                })
                .await,
            "container metadata is for admin certificates; the caller is client-7",
        );
        match ContainerClient::new(ch(&admin, &dn))
            .get_container(dpb::GetContainerRequest { container_id: 1 })
            .await
        {
            Ok(_) => {}
            Err(s) => assert_ne!(
                s.code(),
                Code::PermissionDenied,
                "GetContainer as an admin: {}",
                s.message()
            ),
        }
        denied(
            "PushChunk as a client",
            PipelineDataClient::new(ch(&client, &dn_raft))
                .push_chunk(dpb::PushChunkRequest::default())
                .await,
            "pipeline data is for datanode certificates",
        );
        denied(
            "pipeline vote from datanode 1 with datanode 9's certificate",
            RaftServiceClient::new(ch(&dn9, &dn_raft))
                .vote(raft_req("pipeline-1", 1, 1))
                .await,
            "the caller is datanode-9",
        );
        denied(
            "PullContainer as a client",
            ReplicationClient::new(ch(&client, &dn_repl))
                .pull_container(dpb::PullContainerRequest { container_id: 1 })
                .await,
            "container replication is for datanode certificates",
        );
    });

    // Nothing changed: membership, safe mode and pipelines as before, and the admin
    // certificate of client.toml still does everything.
    let om_after = c.json(&["admin", "om", "roles"]);
    assert_eq!(om_before["members"], om_after["members"]);
    assert_eq!(
        c.json(&["admin", "safemode", "status"])["forced_exit"],
        false
    );
    assert_eq!(pipelines_before, c.json(&["admin", "pipeline", "list"]));
    ok(c.cli().args(["sh", "volume", "create", "/after"]));
}

/// Owners (docs/security.md, "Owners"): a client certificate's user owns the volumes and
/// buckets it creates; another user may neither change them nor read or write their keys,
/// and the refusal changes nothing; an admin may do everything. Other roles may not use the
/// namespace service at all, nor may a user use the multipart calls (they skip the owner
/// checks).
fn users_change_only_what_they_own(c: &DevCluster) {
    use rozone_client::om::ReadMode;
    use rozone_client::{Client, ClientError};
    use rozone_proto::om::om_s3_client::OmS3Client;
    use rozone_proto::om::om_service_client::OmServiceClient;

    let certs = Certs::new(c);
    let om = port(c.dir.path(), "om", "client");
    let (c7, c8, admin) = (
        certs.client_config(c, Role::Client, 7),
        certs.client_config(c, Role::Client, 8),
        certs.client_config(c, Role::Admin, 9),
    );
    let dn9 = certs.cluster(Role::Datanode, 9).channels();
    let client7 = certs.cluster(Role::Client, 7).channels();
    /// [`denied`], for the client library's answer.
    fn refused<T: std::fmt::Debug>(what: &str, r: Result<T, ClientError>, want: &str) {
        let r = r.map_err(|e| match e {
            ClientError::Status { status, .. } => status,
            e => panic!("{what}: not a refusal: {e}"),
        });
        denied(what, r, want);
    }

    let rt = runtime();
    rt.block_on(async {
        let (u7, u8, root) = (
            Client::new(&c7).unwrap(),
            Client::new(&c8).unwrap(),
            Client::new(&admin).unwrap(),
        );
        // client-7 owns what it creates.
        let v = u7.om.create_volume("seven", "", None).await.unwrap();
        assert_eq!(v.owner, "client-7");
        let b = u7.om.create_bucket("seven", "bkt", None).await.unwrap();
        assert_eq!(b.owner, "client-7");
        u7.put_bytes("seven", "bkt", "k", b"mine").await.unwrap();
        refused(
            "a volume for someone else",
            u7.om.create_volume("alices", "alice", None).await,
            "client-7 may not create volume alices owned by alice",
        );

        // client-8 may not touch it, read its keys, or write into it.
        refused(
            "a bucket in another user's volume",
            u8.om.create_bucket("seven", "bkt8", None).await,
            "client-8 may not create bucket bkt8 in volume seven",
        );
        refused(
            "deleting another user's key",
            u8.om.delete_key("seven", "bkt", "k").await,
            "client-8 may not delete key seven/bkt/k",
        );
        refused(
            "renaming another user's key",
            u8.om.rename_key("seven", "bkt", "k", "k2").await,
            "client-8 may not rename key seven/bkt/k",
        );
        refused(
            "reading another user's key",
            u8.om.lookup_key("seven", "bkt", "k", ReadMode::Default).await,
            "client-8 may not read key seven/bkt/k",
        );
        refused(
            "listing another user's keys",
            u8.om.list_keys("seven", "bkt", "", "", 10).await,
            "client-8 may not list keys of seven/bkt",
        );
        refused(
            "writing into another user's bucket",
            u8.put_bytes("seven", "bkt", "k", b"theirs").await,
            "client-8 may not write key seven/bkt/k",
        );
        refused(
            "deleting another user's bucket",
            u8.om.delete_bucket("seven", "bkt").await,
            "client-8 may not delete bucket seven/bkt",
        );
        refused(
            "deleting another user's volume",
            u8.om.delete_volume("seven").await,
            "client-8 may not delete volume seven",
        );
        // Nothing changed, and the owner still reads its key.
        assert_eq!(u7.get_bytes("seven", "bkt", "k").await.unwrap(), b"mine");
        let buckets = u7.om.list_buckets("seven", "").await.unwrap();
        assert_eq!(buckets.len(), 1, "{buckets:?}");
        assert_eq!(buckets[0].owner, "client-7");
        // A bucket an admin makes in client-7's volume is the volume owner's: client-7's.
        let adm = root.om.create_bucket("seven", "adm", None).await.unwrap();
        assert_eq!(adm.owner, "client-7");
        u7.om.delete_bucket("seven", "adm").await.unwrap();

        // Other roles may not use the namespace service; users may not use multipart.
        let ch = |f: &ChannelFactory, a: &str| f.lazy(a).expect("channel");
        denied(
            "CreateVolume as a datanode",
            OmServiceClient::new(ch(&dn9, &om))
                .create_volume(opb::CreateVolumeRequest {
                    name: "dn".into(),
                    ..Default::default()
                })
                .await,
            "the namespace and key calls are for client/admin/s3g certificates; the caller is datanode-9",
        );
        denied(
            "CreateMultipartUpload as a client",
            OmS3Client::new(ch(&client7, &om))
                .create_multipart_upload(opb::CreateMultipartUploadRequest::default())
                .await,
            "CreateMultipartUpload is for s3g/admin certificates; the caller is client-7",
        );

        // An admin may do everything: read, then delete key, bucket and volume.
        assert_eq!(root.get_bytes("seven", "bkt", "k").await.unwrap(), b"mine");
        root.om.delete_key("seven", "bkt", "k").await.unwrap();
        root.om.delete_bucket("seven", "bkt").await.unwrap();
        root.om.delete_volume("seven").await.unwrap();
    });
}

/// The CLI without certificates fails with one line saying what to set.
fn the_cli_without_a_certificate_says_how_to_get_one(c: &DevCluster) {
    let om = port(c.dir.path(), "om", "client");
    let e = fails_with(
        rozone().args(["--om", &om, "sh", "volume", "list"]),
        "no client certificate",
    );
    assert!(e.contains("rozone admin cert issue"), "{e}");
    // Plaintext against a TLS cluster is refused at the handshake, not answered.
    let out = run(rozone().args([
        "--om",
        &om,
        "--insecure",
        "--timeout",
        "3s",
        "sh",
        "volume",
        "list",
    ]));
    assert!(
        !out.status.success(),
        "plaintext call answered: {}",
        text(&out.stdout)
    );
}
