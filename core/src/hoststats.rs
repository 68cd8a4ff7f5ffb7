//! The host's CPU and disk figures that Nomad's `/v1/client/stats` reports (its host stats
//! collector): per-core busy percentages from `/proc/stat` between two readings, and the
//! mounted disks' usage from `/proc/self/mounts` and `statvfs`.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One core's jiffies as `/proc/stat` counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Jiffies {
    user: u64,
    system: u64,
    idle: u64,
    total: u64,
}

/// One core's use between two readings, in percent (Nomad's `CPUStats`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct CpuPercent {
    #[serde(rename = "CPU")]
    pub cpu: String,
    pub user: f64,
    pub system: f64,
    pub idle: f64,
    pub total: f64,
}

/// One mounted disk (Nomad's `DiskStats`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct DiskUsage {
    pub device: String,
    pub mountpoint: String,
    pub size: u64,
    pub used: u64,
    pub available: u64,
    pub used_percent: f64,
    pub inodes_used_percent: f64,
}

/// The per-core lines of a `/proc/stat` text.
fn parse_stat(text: &str) -> Vec<(String, Jiffies)> {
    text.lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let name = f.next()?.to_string();
            let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
            // user nice system idle iowait irq softirq steal (guest time is in user).
            let get = |i: usize| v.get(i).copied().unwrap_or(0);
            let j = Jiffies {
                user: get(0) + get(1),
                system: get(2) + get(5) + get(6),
                idle: get(3) + get(4),
                total: (0..8).map(get).sum(),
            };
            Some((name, j))
        })
        .collect()
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

fn between(before: &[(String, Jiffies)], after: &[(String, Jiffies)]) -> Vec<CpuPercent> {
    after
        .iter()
        .map(|(name, a)| {
            let b = before
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, j)| *j)
                .unwrap_or_default();
            let whole = a.total.saturating_sub(b.total);
            let idle = percent(a.idle.saturating_sub(b.idle), whole);
            CpuPercent {
                cpu: name.clone(),
                user: percent(a.user.saturating_sub(b.user), whole),
                system: percent(a.system.saturating_sub(b.system), whole),
                idle,
                total: if whole == 0 { 0.0 } else { 100.0 - idle },
            }
        })
        .collect()
}

/// A reading: when, each core's jiffies, and the figures it gave.
type Reading = (Instant, Vec<(String, Jiffies)>, Vec<CpuPercent>);

/// Per-core CPU use since the previous reading (at least `min_gap` apart: a reading asked
/// for sooner answers the last figures again, as Nomad's collector does between its
/// collections).
pub struct CpuSampler {
    min_gap: Duration,
    last: Mutex<Option<Reading>>,
}

impl Default for CpuSampler {
    fn default() -> Self {
        let s = Self {
            min_gap: Duration::from_millis(200),
            last: Mutex::new(None),
        };
        s.read();
        s
    }
}

impl CpuSampler {
    /// Each core's use since the last reading.
    pub fn read(&self) -> Vec<CpuPercent> {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, _, figures)) = last.as_ref()
            && at.elapsed() < self.min_gap
        {
            return figures.clone();
        }
        let now = parse_stat(&std::fs::read_to_string("/proc/stat").unwrap_or_default());
        let figures = match last.as_ref() {
            Some((_, before, _)) => between(before, &now),
            None => between(&[], &now),
        };
        *last = Some((Instant::now(), now, figures.clone()));
        figures
    }
}

/// Filesystems that are not disks.
const VIRTUAL: &[&str] = &[
    "proc",
    "sysfs",
    "devtmpfs",
    "devpts",
    "tmpfs",
    "cgroup",
    "cgroup2",
    "securityfs",
    "pstore",
    "bpf",
    "debugfs",
    "tracefs",
    "mqueue",
    "hugetlbfs",
    "configfs",
    "fusectl",
    "autofs",
    "binfmt_misc",
    "rpc_pipefs",
    "nsfs",
    "overlay",
    "squashfs",
    "efivarfs",
    "ramfs",
    "selinuxfs",
];

/// The mounted disks of a `/proc/self/mounts` text: (device, mount point), each device
/// once (its first mount), block devices only.
fn parse_mounts(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let [dev, at, fs, ..] = f[..] else { continue };
        if VIRTUAL.contains(&fs) || !dev.starts_with('/') || out.iter().any(|(d, _)| d == dev) {
            continue;
        }
        // `/proc/self/mounts` escapes spaces and the like as octal.
        out.push((dev.to_string(), unescape(at)));
    }
    out
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Usage of the host's mounted disks.
pub fn disks() -> Vec<DiskUsage> {
    let mounts = parse_mounts(&std::fs::read_to_string("/proc/self/mounts").unwrap_or_default());
    mounts
        .into_iter()
        .filter_map(|(device, mountpoint)| {
            let v = rustix::fs::statvfs(mountpoint.as_str()).ok()?;
            let size = v.f_blocks * v.f_frsize;
            let available = v.f_bavail * v.f_frsize;
            let used = size.saturating_sub(v.f_bfree * v.f_frsize);
            Some(DiskUsage {
                device,
                mountpoint,
                size,
                used,
                available,
                used_percent: percent(used, used + available),
                inodes_used_percent: percent(v.f_files.saturating_sub(v.f_ffree), v.f_files),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cores_between_two_readings() {
        let before =
            "cpu  10 0 10 80 0 0 0 0 0 0\ncpu0 5 0 5 40 0 0 0 0\ncpu1 5 0 5 40 0 0 0 0\nintr 1";
        let after =
            "cpu  40 0 20 140 0 0 0 0 0 0\ncpu0 35 0 5 60 0 0 0 0\ncpu1 5 0 15 80 0 0 0 0\n";
        let c = between(&parse_stat(before), &parse_stat(after));
        assert_eq!(c.len(), 2, "{c:?}");
        assert_eq!(c[0].cpu, "cpu0");
        assert_eq!(
            (c[0].user, c[0].system, c[0].idle, c[0].total),
            (60.0, 0.0, 40.0, 60.0)
        );
        assert_eq!((c[1].user, c[1].system, c[1].idle), (0.0, 20.0, 80.0));
    }

    #[test]
    fn the_hosts_own_readings_are_sane() {
        let s = CpuSampler::default();
        let c = s.read();
        assert!(!c.is_empty());
        assert!(c.iter().all(|c| (0.0..=100.0).contains(&c.total)), "{c:?}");
        let d = disks();
        assert!(d.iter().any(|d| d.size > 0), "{d:?}");
    }

    #[test]
    fn mounts_keep_block_devices_once() {
        let text = "proc /proc proc rw 0 0\n/dev/vda / ext4 rw 0 0\n/dev/vda /etc/hosts ext4 rw 0 0\n\
                    tmpfs /tmp tmpfs rw 0 0\n/dev/vdb /mnt/my\\040disk xfs rw 0 0\n";
        assert_eq!(
            parse_mounts(text),
            [
                ("/dev/vda".to_string(), "/".to_string()),
                ("/dev/vdb".to_string(), "/mnt/my disk".to_string())
            ]
        );
    }
}
