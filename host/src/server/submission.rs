//! The source each job version was submitted as (Nomad's job submissions): stored with the
//! version by a registration that gives it ([`super::RegisterOptions::submission`]), kept
//! as long as the version is, forgotten with the job when it is purged.

use super::Server;
use crate::state::StateError;
use crate::structs::JobSubmission;

impl Server {
    /// The source version `version` of a job was submitted as, when one was given with it.
    pub fn job_submission(
        &self,
        namespace: &str,
        id: &str,
        version: u64,
    ) -> Result<Option<JobSubmission>, StateError> {
        self.db.job_submission(namespace, id, version)
    }
}
