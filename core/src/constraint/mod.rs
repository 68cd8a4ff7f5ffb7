//! Nomad's constraint language, shared by node placement, device requests and the job
//! readers that check them: targets, operands, typed attributes with Nomad's units, and
//! versions. It sits below everything that uses it (jobspec, devicemanager, the agent's
//! placement) and imports none of them.
//!
//! - [`attribute`]: typed attribute values, units, comparison;
//! - [`device`]: operands over typed attributes, and the targets a device rule may name;
//! - [`node`]: a constraint over a node's string-valued keys;
//! - [`version`]: go-version's comparisons.

pub mod attribute;
pub mod device;
pub mod node;
pub mod version;

pub use attribute::DeviceAttribute;
pub use node::Constraint;
pub use version::version_matches;
