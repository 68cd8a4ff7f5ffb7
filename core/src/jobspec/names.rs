//! The ids and names a job gives, checked as Nomad checks them (`Job.Validate`,
//! `TaskGroup.Validate`, `Task.Validate`, with Nomad's messages) and, where they become a
//! path or a log field here, more strictly: a task name is a folder of the allocation dir
//! (`.` and `..` would be the allocation's own folder or the one of every allocation), and
//! no id or name may hold a control character (a newline in a job id forged agent log
//! lines). Each rule answers the message a registration's 400 carries.

/// A control character in `s`, if any (NUL, newline, escape, DEL, …).
fn control(s: &str) -> Option<char> {
    s.chars().find(|c| c.is_control())
}

/// A job's `ID`.
pub fn job_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("Missing job ID".into());
    }
    if id.contains(' ') {
        return Err("Job ID contains a space".into());
    }
    if id.contains('\0') {
        return Err("Job ID contains a null character".into());
    }
    if let Some(c) = control(id) {
        return Err(format!("Job ID contains a control character ({c:?})"));
    }
    if id == "." || id == ".." {
        return Err(format!("Job ID cannot be {id:?}"));
    }
    Ok(())
}

/// A job's `Name`.
pub fn job_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("Missing job name".into());
    }
    if name.contains('\0') {
        return Err("Job Name contains a null character".into());
    }
    if let Some(c) = control(name) {
        return Err(format!("Job Name contains a control character ({c:?})"));
    }
    Ok(())
}

/// A task group's `Name`.
pub fn group_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("Missing task group name".into());
    }
    if name.contains('\0') {
        return Err("Task group name contains null character".into());
    }
    if let Some(c) = control(name) {
        return Err(format!(
            "Task group name contains a control character ({c:?})"
        ));
    }
    if name == "." || name == ".." {
        return Err(format!("Task group cannot be named {name:?}"));
    }
    Ok(())
}

/// A task's `Name`: also the name of its folder in the allocation dir.
pub fn task_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("Missing task name".into());
    }
    if name == "alloc" {
        return Err("Task cannot be named \"alloc\"".into());
    }
    if name.contains(['/', '\\']) {
        return Err("Task name cannot include slashes".into());
    }
    if name.contains('\0') {
        return Err("Task name cannot include null characters".into());
    }
    if let Some(c) = control(name) {
        return Err(format!(
            "Task name cannot include control characters ({c:?})"
        ));
    }
    if name == "." || name == ".." {
        return Err(format!(
            "Task cannot be named {name:?}: a task's name is its folder in the allocation dir"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_would_be_paths_or_log_lines_are_refused() {
        for ok in ["web", "web/periodic-1700000000", "a.b", "x_y-z"] {
            job_id(ok).unwrap();
        }
        for (bad, want) in [
            ("", "Missing job ID"),
            ("a b", "contains a space"),
            ("a\0b", "null character"),
            ("a\nb", "control character"),
            ("..", "cannot be"),
        ] {
            assert!(job_id(bad).unwrap_err().contains(want), "{bad:?}");
        }
        for ok in ["web", "web.1", "web-server"] {
            task_name(ok).unwrap();
        }
        for (bad, want) in [
            ("", "Missing task name"),
            ("alloc", "\"alloc\""),
            ("..", "folder in the allocation dir"),
            (".", "folder in the allocation dir"),
            ("a/b", "slashes"),
            ("a\\b", "slashes"),
            ("a\0", "null characters"),
            ("a\r", "control characters"),
        ] {
            assert!(task_name(bad).unwrap_err().contains(want), "{bad:?}");
        }
        assert!(group_name("..").is_err() && group_name("g\n").is_err());
        assert!(
            group_name("cache/db").is_ok(),
            "Nomad allows a / in a group name"
        );
        assert!(job_name("x\u{1b}[31m").is_err());
    }
}
