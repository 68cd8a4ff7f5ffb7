//! The plugin over a fake sysfs and devfs tree (plain files and symlinks in a temp folder).

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use super::*;
use paddock_device_sdk::Attribute;
use scan::{ClassRule, matches};

fn write(path: PathBuf, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// sysfs with kvm and tun (no fuse), an amdgpu render node behind its PCI device, three
/// ttys; devfs with the nodes of kvm, the render node and ttyUSB0 only.
fn tree(name: &str) -> (PathBuf, Config) {
    let root = std::env::temp_dir().join(format!("host-devices-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let sys = root.join("sys");
    write(
        sys.join("class/misc/kvm/uevent"),
        "MAJOR=10\nMINOR=232\nDEVNAME=kvm\n",
    );
    write(
        sys.join("class/misc/tun/uevent"),
        "MAJOR=10\nMINOR=200\nDEVNAME=net/tun\n",
    );
    write(
        sys.join("class/drm/card0/uevent"),
        "MAJOR=226\nMINOR=0\nDEVNAME=dri/card0\n",
    );
    let pci = sys.join("devices/pci0000:00/0000:03:00.0");
    write(pci.join("vendor"), "0x1002\n");
    write(pci.join("device"), "0x73bf\n");
    write(pci.join("mem_info_vram_total"), "8589934592\n");
    write(pci.join("gpu_busy_percent"), "7\n");
    symlink("../../../bus/pci/drivers/amdgpu", pci.join("driver")).unwrap();
    let render = sys.join("class/drm/renderD128");
    write(
        render.join("uevent"),
        "MAJOR=226\nMINOR=128\nDEVNAME=dri/renderD128\n",
    );
    symlink(
        "../../../devices/pci0000:00/0000:03:00.0",
        render.join("device"),
    )
    .unwrap();
    for tty in ["ttyUSB0", "ttyUSB1", "ttyS0"] {
        write(
            sys.join(format!("class/tty/{tty}/uevent")),
            &format!("MAJOR=188\nDEVNAME={tty}\n"),
        );
    }
    for node in ["kvm", "dri/renderD128", "ttyUSB0"] {
        write(root.join("dev").join(node), "");
    }
    let config = Config {
        sysfs: sys.display().to_string(),
        devfs: root.join("dev").display().to_string(),
        classes: vec![ClassRule {
            class: "tty".into(),
            pattern: "ttyUSB*".into(),
            vendor: "usb".into(),
            device_type: "serial".into(),
            name: "tty".into(),
        }],
        ..Config::default()
    };
    (root, config)
}

fn group<'a>(groups: &'a [DeviceGroup], name: &str) -> &'a DeviceGroup {
    groups.iter().find(|g| g.name == name).unwrap()
}

#[test]
fn what_sysfs_has_is_reported_in_groups_with_health_from_devfs() {
    let (root, config) = tree("groups");
    let found = scan::scan(&config);
    let ids: Vec<&str> = found.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, ["kvm", "tun", "renderD128", "ttyUSB0", "ttyUSB1"]);
    let groups = groups(&found);
    let kvm = group(&groups, "kvm");
    assert_eq!(
        (kvm.vendor.as_str(), kvm.device_type.as_str()),
        ("linux", "kvm")
    );
    assert!(kvm.devices[0].healthy);
    assert_eq!(
        kvm.attributes,
        vec![("major".to_string(), Attribute::Int(10))]
    );
    let tun = group(&groups, "tun");
    assert!(!tun.devices[0].healthy);
    let reason = &tun.devices[0].health_description;
    assert!(
        reason.starts_with("no device node ") && reason.ends_with("/dev/net/tun"),
        "{reason}"
    );
    let gpu = group(&groups, "amdgpu-73bf");
    assert_eq!(
        (gpu.vendor.as_str(), gpu.device_type.as_str()),
        ("amd", "gpu")
    );
    assert_eq!(gpu.devices[0].pci_bus_id.as_deref(), Some("0000:03:00.0"));
    assert!(
        gpu.attributes
            .contains(&("memory_mib".to_string(), Attribute::Int(8192)))
    );
    assert!(
        gpu.attributes
            .contains(&("driver".to_string(), Attribute::Str("amdgpu".into())))
    );
    let tty = group(&groups, "tty");
    assert_eq!(tty.devices.len(), 2);
    assert_eq!(
        (tty.devices[0].healthy, tty.devices[1].healthy),
        (true, false)
    );
    std::fs::remove_dir_all(root).unwrap();
}

#[test]
fn without_devfs_to_read_sysfs_alone_says_a_device_is_there() {
    let (root, mut config) = tree("nodevfs");
    config.devfs = "/nonexistent-devfs".into();
    let found = scan::scan(&config);
    assert!(found.iter().all(|f| f.unhealthy.is_none()), "{found:?}");
    assert_eq!(found[1].host_path, "/nonexistent-devfs/net/tun");
    config.misc.clear();
    config.drm = false;
    config.classes.clear();
    assert!(scan::scan(&config).is_empty());
    std::fs::remove_dir_all(root).unwrap();
}

#[test]
fn a_reservation_gives_the_nodes_and_their_paths_by_type() {
    let (root, config) = tree("reserve");
    let found = scan::scan(&config);
    let ids = ["kvm", "ttyUSB0", "renderD128", "ttyUSB1"].map(String::from);
    let r = reservation(&found, &ids).unwrap();
    let env: Vec<(&str, &str)> = r
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        env,
        [
            ("HOST_DEVICES_KVM", "/dev/kvm"),
            ("HOST_DEVICES_SERIAL", "/dev/ttyUSB0,/dev/ttyUSB1"),
            ("HOST_DEVICES_GPU", "/dev/dri/renderD128")
        ]
    );
    assert_eq!(r.devices[2].task_path, "/dev/dri/renderD128");
    assert_eq!(
        Path::new(&r.devices[2].host_path),
        root.join("dev/dri/renderD128")
    );
    assert_eq!(r.devices[2].permissions, "rw");
    let unknown = reservation(&found, &["kvm".into(), "sda".into()]);
    assert_eq!(unknown, Err(DeviceError::UnknownDevice("sda".into())));
    std::fs::remove_dir_all(root).unwrap();
}

#[test]
fn stats_give_busy_percent_where_the_kernel_tells_it() {
    let (root, config) = tree("stats");
    let stats = stats(&scan::scan(&config), 9);
    let gpu = stats.iter().find(|g| g.device_type == "gpu").unwrap();
    assert_eq!(gpu.instances[0].summary.number, Some(7.0));
    let tun = stats.iter().find(|g| g.name == "tun").unwrap();
    assert_eq!(tun.instances[0].summary.text.as_deref(), Some("unhealthy"));
    assert_eq!(tun.instances[0].timestamp, 9);
    std::fs::remove_dir_all(root).unwrap();
}

#[test]
fn patterns() {
    assert!(matches("ttyUSB*", "ttyUSB12"));
    assert!(matches("tty?", "ttyS") && !matches("tty?", "ttyS0"));
    assert!(!matches("ttyUSB*", "ttyS0"));
    assert!(matches("*", ""));
}
