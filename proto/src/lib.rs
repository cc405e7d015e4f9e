//! rozone-proto: the gRPC wire types of every rozone service, generated from `proto/*.proto`.
//!
//! Nothing else lives here: conversion into domain types happens at the receiving edge of
//! each service crate, where missing fields are rejected.

/// Raft transport between members of one Raft group (vote, append, snapshot, leader transfer)
/// and the snapshot (checkpoint) download service.
pub mod raft {
    tonic::include_proto!("rozone.raft.v1");
}

/// SCM ring management (ring info, checkpoint preparation, adding a member).
pub mod scm {
    tonic::include_proto!("rozone.scm.v1");
}
