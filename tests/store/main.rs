//! The event log and what folds it: backends (sled, PostgreSQL), crashes and faults, copies, projections and read models.
//! One test binary for the area (each file of it is a module), so od is linked once for all of them.

#[path = "../common/mod.rs"]
mod common;

mod append_all;
mod background_verify;
mod blobs;
mod concurrency;
mod corruption;
mod crash;
mod disk_full;
mod durability;
mod fencing;
mod fencing_daemons;
mod hostile_ids;
mod lease_model;
mod log_copy;
mod multi_daemon;
mod pg_kill;
mod pg_tls;
mod power_loss;
mod projections;
mod read_ahead;
mod read_model_paging;
mod read_models;
mod read_models_daemon;
mod sled_buffers;
mod snapshot_bodies;
mod store_basics;
mod store_checkpoint;
mod store_contract;
mod store_faults;
mod store_scale;
mod store_select;
mod subscribe;
mod torn_write;
mod workspace_projection;
