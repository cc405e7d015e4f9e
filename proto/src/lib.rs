//! rozone-proto: the gRPC wire types of every rozone service, generated from `proto/*.proto`.
//!
//! Nothing else lives here: conversion into domain types happens at the receiving edge of
//! each service crate, where missing fields are rejected.

/// Raft transport between members of one Raft group (vote, append, snapshot, leader transfer)
/// and the snapshot (checkpoint) download service.
pub mod raft {
    tonic::include_proto!("rozone.raft.v1");
}

/// The ring service every replicated daemon (OM, SCM) serves: ring info, joining,
/// membership changes, leader transfer, read index.
pub mod ring {
    tonic::include_proto!("rozone.ring.v1");
}

/// SCM ring management, block allocation, the datanode protocol and SCM admin.
pub mod scm {
    tonic::include_proto!("rozone.scm.v1");
}

/// OM namespace and key operations, OM admin and OM ring joining.
pub use packages::rozone::om::v1 as om;

/// Package paths as prost names them in cross-package references: `om.proto` imports
/// `scm.proto`, so its generated code says `super::super::scm::v1::BlockId`.
mod packages {
    pub mod rozone {
        pub mod om {
            pub mod v1 {
                tonic::include_proto!("rozone.om.v1");
            }
        }
        pub mod scm {
            pub mod v1 {
                pub use crate::scm::*;
            }
        }
    }
}

/// Datanode container and chunk I/O, and container replication.
pub mod datanode {
    tonic::include_proto!("rozone.datanode.v1");
}
