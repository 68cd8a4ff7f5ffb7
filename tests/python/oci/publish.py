"""An independent publisher for the OCI tests: pushes components and cosign signatures with
the `oras` Python client and signs with `openssl`, so that a mistake mirrored by Paddock's own
pusher and puller shows.

    publish.py push REGISTRY REPO:TAG FILE [LAYER-MEDIA-TYPE] -> prints the manifest digest
    publish.py sign REGISTRY REPO DIGEST KEY.pem [AS-DIGEST]  -> signs DIGEST (cosign's simple
        signing); with AS-DIGEST, pushes that signature under AS-DIGEST's tag (a replay)
    publish.py verify REGISTRY REPO DIGEST PUB.pem    -> checks a signature someone else made
    publish.py manifest REGISTRY REPO:TAG             -> prints the manifest JSON
    publish.py digest REGISTRY REPO:TAG               -> prints the digest the registry serves
"""

import base64
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import oras.client
import requests

WASM_CONFIG = "application/vnd.wasm.config.v0+json"
WASM_LAYER = "application/wasm"
SIG_LAYER = "application/vnd.dev.cosign.simplesigning.v1+json"
SIG_ANNOTATION = "dev.cosignproject.cosign/signature"


def client(registry):
    return oras.client.OrasClient(hostname=registry, insecure=True, tls_verify=False)


def push(registry, target, path, media_type=WASM_LAYER):
    with tempfile.TemporaryDirectory() as d:
        os.chdir(d)
        name = "component.wasm"
        with open(path, "rb") as f, open(name, "wb") as out:
            data = f.read()
            out.write(data)
        with open("config.json", "w") as f:
            json.dump(
                {
                    "architecture": "wasm",
                    "os": "wasip2",
                    "layerDigests": ["sha256:" + hashlib.sha256(data).hexdigest()],
                },
                f,
            )
        r = client(registry).push(
            target=f"{registry}/{target}",
            files=[f"{name}:{media_type}"],
            manifest_config=f"config.json:{WASM_CONFIG}",
            quiet=True,
        )
        print(r.headers["Docker-Content-Digest"])


def sign(registry, repo, digest, key, as_digest=None):
    payload = json.dumps(
        {
            "critical": {
                "identity": {"docker-reference": f"{registry}/{repo}"},
                "image": {"docker-manifest-digest": digest},
                "type": "cosign container image signature",
            },
            "optional": None,
        },
        separators=(",", ":"),
    ).encode()
    with tempfile.TemporaryDirectory() as d:
        os.chdir(d)
        with open("payload.json", "wb") as f:
            f.write(payload)
        subprocess.run(
            ["openssl", "dgst", "-sha256", "-sign", key, "-out", "sig.der", "payload.json"],
            check=True,
        )
        with open("sig.der", "rb") as f:
            sig = base64.b64encode(f.read()).decode()
        with open("annotations.json", "w") as f:
            json.dump({"payload.json": {SIG_ANNOTATION: sig}}, f)
        tag = (as_digest or digest).replace(":", "-", 1) + ".sig"
        client(registry).push(
            target=f"{registry}/{repo}:{tag}",
            files=[f"payload.json:{SIG_LAYER}"],
            annotation_file="annotations.json",
            quiet=True,
        )


def manifest(registry, target):
    repo, _, ref = target.rpartition(":")
    r = requests.get(
        f"http://{registry}/v2/{repo}/manifests/{ref}",
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
        timeout=10,
    )
    r.raise_for_status()
    return r.json(), r.headers.get("Docker-Content-Digest"), r.content


def verify(registry, repo, digest, pub):
    tag = digest.replace(":", "-", 1) + ".sig"
    m, _, _ = manifest(registry, f"{repo}:{tag}")
    for layer in m["layers"]:
        if layer["mediaType"] != SIG_LAYER:
            continue
        payload = requests.get(
            f"http://{registry}/v2/{repo}/blobs/{layer['digest']}", timeout=10
        ).content
        body = json.loads(payload)
        assert body["critical"]["image"]["docker-manifest-digest"] == digest, body
        assert body["critical"]["type"] == "cosign container image signature", body
        with tempfile.TemporaryDirectory() as d:
            os.chdir(d)
            open("payload", "wb").write(payload)
            open("sig.der", "wb").write(
                base64.b64decode(layer["annotations"][SIG_ANNOTATION])
            )
            ok = subprocess.run(
                ["openssl", "dgst", "-sha256", "-verify", pub, "-signature", "sig.der", "payload"],
                capture_output=True,
            )
            if ok.returncode == 0:
                print("verified")
                return
    sys.exit("no signature layer verifies")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "push":
        push(*args)
    elif cmd == "sign":
        sign(*args)
    elif cmd == "verify":
        verify(*args)
    elif cmd == "manifest":
        m, digest, raw = manifest(*args)
        assert digest == "sha256:" + hashlib.sha256(raw).hexdigest(), (digest, raw)
        print(json.dumps(m))
    elif cmd == "digest":
        m, digest, raw = manifest(*args)
        assert digest == "sha256:" + hashlib.sha256(raw).hexdigest(), (digest, raw)
        print(digest)
    else:
        sys.exit(f"unknown command {cmd}")
