//! openraft's own storage conformance suite against our RocksDB log store and state machine.

use openraft::testing::log::{StoreBuilder, Suite};
use openraft::StorageError;
use rozone_raft::log_store::RocksLogStore;
use rozone_raft::state_machine::RocksStateMachine;
use rozone_raft::TypeConfig;
use rozone_tests::KvLogic;

struct Builder;

fn io_err(e: std::io::Error) -> StorageError<TypeConfig> {
    StorageError::from_io_error(openraft::ErrorSubject::Store, openraft::ErrorVerb::Read, e)
}

impl StoreBuilder<TypeConfig, RocksLogStore, RocksStateMachine<KvLogic>, tempfile::TempDir>
    for Builder
{
    async fn build(
        &self,
    ) -> Result<
        (tempfile::TempDir, RocksLogStore, RocksStateMachine<KvLogic>),
        StorageError<TypeConfig>,
    > {
        let dir = tempfile::tempdir().map_err(io_err)?;
        let log = RocksLogStore::open(&dir.path().join("log"), true).map_err(io_err)?;
        let sm = RocksStateMachine::open(&dir.path().join("sm"), &dir.path().join("snap"), KvLogic)
            .map_err(io_err)?;
        Ok((dir, log, sm))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openraft_storage_suite_passes_on_rocksdb_log_store() -> Result<(), StorageError<TypeConfig>>
{
    Suite::test_all(Builder).await?;
    Ok(())
}
