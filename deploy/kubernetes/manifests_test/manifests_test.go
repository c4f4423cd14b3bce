package manifests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// repoRoot is the conch module's directory, from this one.
const repoRoot = "../../.."

// sandboxdFlags are the flags of upstream sandboxd that `conch sandboxd`
// takes, with conch serve's; they are checked against the binary's own
// when it has `conch sandboxd`.
var sandboxdFlags = []string{"grpc-port", "rest-port", "root-dir", "metadata-env-prefix",
	"shutdown-timeout", "http-idle-timeout"}

// buildConch builds cmd/conch of this tree.
func buildConch(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "conch")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/conch")
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/conch: %s", out)
	return bin
}

// helpFlags returns the flags `conch sub -h` lists; ok is false when the
// binary has no such subcommand.
func helpFlags(t *testing.T, bin, sub string) (flags map[string]bool, ok bool) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.CommandContext(t.Context(), bin, sub, "-h")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		require.Contains(t, out.String(), "unknown command", "conch %s -h: %v", sub, err)
		return nil, false
	}
	flags = make(map[string]bool)
	for _, m := range regexp.MustCompile(`(?m)^  --?([a-z0-9-]+)`).FindAllStringSubmatch(out.String(), -1) {
		flags[m[1]] = true
	}
	require.NotEmpty(t, flags, "conch %s -h lists no flags: %s", sub, out.String())
	return flags, true
}

// document is one YAML document of a manifest.
type document struct {
	file string
	raw  []byte
	head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
}

func (d document) String() string {
	return fmt.Sprintf("%s: %s %s", filepath.Base(d.file), d.head.Kind, d.head.Metadata.Name)
}

// documents reads every document of the manifests in deploy/kubernetes.
func documents(t *testing.T) []document {
	t.Helper()
	files, err := filepath.Glob("../*.yaml")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 3)
	var docs []document
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, part := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			if strings.TrimSpace(regexp.MustCompile(`(?m)^#.*$`).ReplaceAllString(part, "")) == "" {
				continue
			}
			d := document{file: f, raw: []byte(part)}
			require.NoError(t, yaml.Unmarshal(d.raw, &d.head), f)
			docs = append(docs, d)
		}
	}
	return docs
}

// TestManifests decodes every manifest strictly and checks what it says of
// conch against the binary built from this tree.
func TestManifests(t *testing.T) {
	schemas, err := loadCRDs("testdata/crds")
	require.NoError(t, err)
	bin := buildConch(t)
	serveFlags, ok := helpFlags(t, bin, "serve")
	require.True(t, ok)
	sbFlags, ok := helpFlags(t, bin, "sandboxd")
	if !ok {
		t.Log("this conch has no sandboxd: its flags are checked as upstream sandboxd's and conch serve's")
		sbFlags = make(map[string]bool)
		for f := range serveFlags {
			sbFlags[f] = true
		}
		for _, f := range sandboxdFlags {
			sbFlags[f] = true
		}
	}
	flagsOf := map[string]map[string]bool{"serve": serveFlags, "sandboxd": sbFlags}

	names := make(map[string]bool) // "Kind/name" of every document
	var refs []string              // "Kind/name" that documents refer to
	kinds := make(map[string]bool)
	var services []corev1.Service
	var deployments []appsv1.Deployment
	for _, d := range documents(t) {
		t.Run(d.String(), func(t *testing.T) {
			names[d.head.Kind+"/"+d.head.Metadata.Name] = true
			kinds[d.head.Kind] = true
			switch d.head.APIVersion + " " + d.head.Kind {
			case "apps/v1 Deployment":
				var dep appsv1.Deployment
				require.NoError(t, yaml.UnmarshalStrict(d.raw, &dep))
				require.Equal(t, dep.Spec.Selector.MatchLabels, dep.Spec.Template.Labels, "the selector selects the pods")
				checkPod(t, dep.Spec.Template.Spec, flagsOf)
				deployments = append(deployments, dep)
			case "v1 Service":
				var svc corev1.Service
				require.NoError(t, yaml.UnmarshalStrict(d.raw, &svc))
				services = append(services, svc)
			default:
				s := schemas[d.head.APIVersion+" "+d.head.Kind]
				require.NotNil(t, s, "no CRD serves %s %s", d.head.APIVersion, d.head.Kind)
				var obj map[string]any
				require.NoError(t, yaml.UnmarshalStrict(d.raw, &obj))
				require.Empty(t, validate("", obj, s))
				var meta struct {
					Metadata metav1.ObjectMeta `json:"metadata"`
				}
				require.NoError(t, yaml.Unmarshal(d.raw, &meta))
				metaJSON, err := json.Marshal(obj["metadata"])
				require.NoError(t, err)
				require.NoError(t, yaml.UnmarshalStrict(metaJSON, &meta.Metadata), "metadata")
				spec := obj["spec"].(map[string]any)
				switch d.head.Kind {
				case "SandboxTemplate", "Sandbox":
					podJSON, err := json.Marshal(spec["podTemplate"].(map[string]any)["spec"])
					require.NoError(t, err)
					var pod corev1.PodSpec
					require.NoError(t, yaml.UnmarshalStrict(podJSON, &pod), "podTemplate.spec as a PodSpec")
					checkPod(t, pod, flagsOf)
				case "SandboxWarmPool":
					refs = append(refs, "SandboxTemplate/"+spec["sandboxTemplateRef"].(map[string]any)["name"].(string))
				case "SandboxClaim":
					refs = append(refs, "SandboxWarmPool/"+spec["warmPoolRef"].(map[string]any)["name"].(string))
				}
			}
		})
	}
	for _, k := range []string{"SandboxTemplate", "SandboxClaim", "Deployment", "Service"} {
		require.True(t, kinds[k], "the manifests hold a %s", k)
	}
	for _, r := range refs {
		require.True(t, names[r], "%s is referred to and not defined", r)
	}
	for _, svc := range services {
		sel := false
		for _, dep := range deployments {
			if labelsMatch(svc.Spec.Selector, dep.Spec.Template.Labels) {
				sel = true
				for _, p := range svc.Spec.Ports {
					require.NotNil(t, containerPort(dep.Spec.Template.Spec.Containers, p.TargetPort),
						"Service %s port %s targets %s, which no container has", svc.Name, p.Name, p.TargetPort.String())
				}
			}
		}
		require.True(t, sel, "Service %s selects a Deployment's pods", svc.Name)
	}
}

// labelsMatch reports whether labels hold every label of sel.
func labelsMatch(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

// containerPort returns the port p names in one of cs, nil when none has it.
func containerPort(cs []corev1.Container, p intstr.IntOrString) *corev1.ContainerPort {
	for _, c := range cs {
		for i, cp := range c.Ports {
			if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
				return &c.Ports[i]
			}
		}
	}
	return nil
}

// checkPod checks the pod that runs conch: its flags are the daemon's, its
// ports are those it listens on, its probes ask /readyz and /livez on a
// port that serves them without a token to the kubelet, and every
// container is restricted.
func checkPod(t *testing.T, pod corev1.PodSpec, flagsOf map[string]map[string]bool) {
	t.Helper()
	var conch *corev1.Container
	for i, c := range pod.Containers {
		if strings.Contains(c.Image, "/conch:") {
			require.Nil(t, conch, "one conch container")
			conch = &pod.Containers[i]
		}
		checkRestricted(t, pod, c)
	}
	require.NotNil(t, conch, "a container runs the conch image")
	require.Empty(t, conch.Command, "the image's entrypoint is conch")
	require.NotEmpty(t, conch.Args)
	sub := conch.Args[0]
	known, ok := flagsOf[sub]
	require.True(t, ok, "conch %s: want serve or sandboxd", sub)
	args := make(map[string]string)
	for _, a := range conch.Args[1:] {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		require.True(t, ok && strings.HasPrefix(a, "--"), "%q: want --flag=value", a)
		require.True(t, known[name], "conch %s has no flag --%s", sub, name)
		if name != "allow-host" {
			_, dup := args[name]
			require.False(t, dup, "--%s given twice", name)
		}
		args[name] = value
	}

	// The daemon listens where the pod says it does.
	listening := make(map[int32]string) // port -> host
	hostPort := func(flag string) {
		if v, ok := args[flag]; ok {
			h, p, err := net.SplitHostPort(v)
			require.NoError(t, err, "--%s", flag)
			n, err := strconv.Atoi(p)
			require.NoError(t, err)
			listening[int32(n)] = h
		}
	}
	hostPort("listen")
	hostPort("metrics-listen")
	if sub == "sandboxd" {
		for flag, def := range map[string]string{"grpc-port": "9090", "rest-port": "8080"} {
			v := cmpOr(args[flag], def)
			n, err := strconv.Atoi(v)
			require.NoError(t, err)
			listening[int32(n)] = "127.0.0.1"
			// The workload finds the runtime at these ports on the pod's
			// loopback.
			env := "SANDBOXD_" + strings.ToUpper(strings.TrimSuffix(flag, "-port")) + "_ADDR"
			require.Equal(t, "localhost:"+v, workloadEnv(pod, conch.Name, env), env)
		}
		require.Equal(t, "/workspace", cmpOr(args["root-dir"], "/workspace"))
	}
	for _, cp := range conch.Ports {
		_, ok := listening[cp.ContainerPort]
		require.True(t, ok, "container port %d (%s): the daemon does not listen there", cp.ContainerPort, cp.Name)
	}

	// Probes: /readyz and /livez, on a port that serves them to the
	// kubelet (not only on loopback) without a token.
	for path, probe := range map[string]*corev1.Probe{"/readyz": conch.ReadinessProbe, "/livez": conch.LivenessProbe} {
		require.NotNil(t, probe, path)
		require.NotNil(t, probe.HTTPGet, path)
		require.Equal(t, path, probe.HTTPGet.Path)
		cp := containerPort([]corev1.Container{*conch}, probe.HTTPGet.Port)
		require.NotNil(t, cp, "%s probes port %s, which the container does not have", path, probe.HTTPGet.Port.String())
		host := listening[cp.ContainerPort]
		require.False(t, host == "127.0.0.1" || host == "localhost" || host == "::1",
			"%s probes port %d, where the daemon listens on loopback only", path, cp.ContainerPort)
	}
	require.NotNil(t, pod.TerminationGracePeriodSeconds)
	if v, ok := args["drain-timeout"]; ok {
		require.Greater(t, *pod.TerminationGracePeriodSeconds, durationSeconds(t, v),
			"the grace period leaves the drain time to end")
	}

	// A read-only root: /workspace and /tmp are writable emptyDirs, and the
	// state directory is under /tmp.
	for _, dir := range []string{"/workspace", "/tmp"} {
		m := slices.IndexFunc(conch.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == dir })
		require.GreaterOrEqual(t, m, 0, "%s is mounted", dir)
		require.False(t, conch.VolumeMounts[m].ReadOnly)
		v := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == conch.VolumeMounts[m].Name })
		require.GreaterOrEqual(t, v, 0)
		require.NotNil(t, pod.Volumes[v].EmptyDir, "%s is an emptyDir", dir)
	}
	require.True(t, strings.HasPrefix(containerEnv(*conch, "XDG_STATE_HOME"), "/tmp/"), "the state directory is writable")
	require.NotEmpty(t, conch.Resources.Requests)
	require.NotEmpty(t, conch.Resources.Limits)
}

// checkRestricted checks the restricted Pod Security Standard's demands of
// a container: non-root, no privilege escalation, every capability dropped,
// and a read-only root filesystem.
func checkRestricted(t *testing.T, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	require.NotNil(t, sc, "%s: securityContext", c.Name)
	nonRoot := (sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) ||
		(pod.SecurityContext != nil && pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot)
	require.True(t, nonRoot, "%s: runAsNonRoot", c.Name)
	require.True(t, sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation, "%s: allowPrivilegeEscalation false", c.Name)
	require.True(t, sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem, "%s: readOnlyRootFilesystem", c.Name)
	require.NotNil(t, sc.Capabilities, "%s: capabilities", c.Name)
	require.Contains(t, sc.Capabilities.Drop, corev1.Capability("ALL"), "%s: drops every capability", c.Name)
	require.Empty(t, sc.Capabilities.Add, "%s: adds no capability", c.Name)
	require.True(t, sc.Privileged == nil || !*sc.Privileged, "%s: not privileged", c.Name)
	seccomp := sc.SeccompProfile
	if seccomp == nil && pod.SecurityContext != nil {
		seccomp = pod.SecurityContext.SeccompProfile
	}
	require.NotNil(t, seccomp, "%s: a seccomp profile", c.Name)
	require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, seccomp.Type)
}

// workloadEnv returns the value of env in the first container but conch
// that sets it.
func workloadEnv(pod corev1.PodSpec, conch, env string) string {
	for _, c := range pod.Containers {
		if c.Name != conch {
			if v := containerEnv(c, env); v != "" {
				return v
			}
		}
	}
	return ""
}

func containerEnv(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func durationSeconds(t *testing.T, v string) int64 {
	t.Helper()
	var d int64
	n, err := fmt.Sscanf(v, "%ds", &d)
	require.NoError(t, err, "a duration in seconds, like 30s: %q", v)
	require.Equal(t, 1, n)
	return d
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
