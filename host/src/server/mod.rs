//! The server's side of the agent, as Nomad's `nomad/` and `scheduler/` are to its
//! `client/`: deciding what runs on the node. [`plan`] computes a plan of one job from a
//! client snapshot as a value; [`feasible`] is what a node must have for an allocation to
//! fit; [`bounds`] is what one job may ask of the node at all.

pub mod bounds;
pub mod feasible;
pub mod plan;
