//! The event log and what folds it: backends (sled, PostgreSQL), crashes and faults, copies, projections and read models.
//! One test binary for the area (each file of it is a module), so od is linked once for all of them.

#[path = "../common/mod.rs"]
mod common;

#[path = "../append_all.rs"]
mod append_all;
#[path = "../background_verify.rs"]
mod background_verify;
#[path = "../blobs.rs"]
mod blobs;
#[path = "../concurrency.rs"]
mod concurrency;
#[path = "../corruption.rs"]
mod corruption;
#[path = "../crash.rs"]
mod crash;
#[path = "../disk_full.rs"]
mod disk_full;
#[path = "../durability.rs"]
mod durability;
#[path = "../log_copy.rs"]
mod log_copy;
#[path = "../multi_daemon.rs"]
mod multi_daemon;
#[path = "../pg_kill.rs"]
mod pg_kill;
#[path = "../projections.rs"]
mod projections;
#[path = "../read_model_paging.rs"]
mod read_model_paging;
#[path = "../read_models.rs"]
mod read_models;
#[path = "../read_models_daemon.rs"]
mod read_models_daemon;
#[path = "../sled_buffers.rs"]
mod sled_buffers;
#[path = "../snapshot_bodies.rs"]
mod snapshot_bodies;
#[path = "../store_basics.rs"]
mod store_basics;
#[path = "../store_checkpoint.rs"]
mod store_checkpoint;
#[path = "../store_contract.rs"]
mod store_contract;
#[path = "../store_faults.rs"]
mod store_faults;
#[path = "../store_scale.rs"]
mod store_scale;
#[path = "../store_select.rs"]
mod store_select;
#[path = "../subscribe.rs"]
mod subscribe;
#[path = "../torn_write.rs"]
mod torn_write;
#[path = "../workspace_projection.rs"]
mod workspace_projection;
