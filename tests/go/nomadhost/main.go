// Command nomadhost plays Nomad's client against paddock-nomad-driver with HashiCorp's own
// go-plugin client (Debian's 1.0.1): the handshake and the gRPC connection are go-plugin's,
// the Nomad services are called through clients generated from the repo's protos, and the
// configs are encoded by go-cty's msgpack as Nomad encodes them.
//
// Usage: nomadhost [-name paddock] <plugin binary>
//
// It prints `ok <step>` (and what it saw) for each step on stdout and exits 0; on the first
// failure it prints `FAIL <step>: <why>` and exits 1. The host's log, with the plugin's
// stderr as go-plugin re-logs it, goes to stderr (level NOMADHOST_LOG, default debug).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"github.com/zclconf/go-cty/cty"
	"google.golang.org/protobuf/types/known/durationpb"

	"nomadproto/base"
	"nomadproto/drivers"
)

// How long the whole run may take before it is called hung.
const overall = 2 * time.Minute

var (
	mu       sync.Mutex
	current  = "setup"
	pluginCm *exec.Cmd
	goClient *plugin.Client
	tempDirs []string
)

func step(name string) {
	mu.Lock()
	defer mu.Unlock()
	current = name
}

func ok(format string, args ...interface{}) {
	mu.Lock()
	defer mu.Unlock()
	detail := fmt.Sprintf(format, args...)
	if detail != "" {
		detail = " (" + detail + ")"
	}
	fmt.Printf("ok %s%s\n", current, detail)
}

// fail reports the step that failed, ends the plugin if it runs (go-plugin's Kill, and
// SIGKILL if that does not return within 5 s), and exits 1.
func fail(format string, args ...interface{}) {
	mu.Lock()
	msg := fmt.Sprintf("FAIL %s: %s", current, fmt.Sprintf(format, args...))
	fmt.Println(msg)
	fmt.Fprintln(os.Stderr, msg)
	if goClient != nil {
		killed := make(chan struct{})
		go func() {
			goClient.Kill()
			close(killed)
		}()
		select {
		case <-killed:
		case <-time.After(5 * time.Second):
		}
	}
	if pluginCm != nil && pluginCm.Process != nil {
		_ = pluginCm.Process.Kill()
	}
	for _, d := range tempDirs {
		_ = os.RemoveAll(d)
	}
	os.Exit(1)
}

func tempDir(prefix string) string {
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		fail("a temp dir: %v", err)
	}
	mu.Lock()
	tempDirs = append(tempDirs, d)
	mu.Unlock()
	return d
}

func randomHex(n int) string {
	b := make([]byte, (n+1)/2)
	if _, err := rand.Read(b); err != nil {
		fail("random bytes: %v", err)
	}
	return hex.EncodeToString(b)[:n]
}

// An allocation id shaped as Nomad's (a UUID).
func allocID() string {
	h := randomHex(32)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func rpcCtx(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

func main() {
	name := flag.String("name", "paddock", "the driver name PluginInfo must report")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: nomadhost [-name paddock] <plugin binary>")
		os.Exit(2)
	}
	bin := flag.Arg(0)
	time.AfterFunc(overall, func() { fail("the run took over %v", overall) })

	level := hclog.LevelFromString(os.Getenv("NOMADHOST_LOG"))
	if level == hclog.NoLevel {
		level = hclog.Debug
	}
	watched := newWatchedOutput()
	logger := hclog.New(&hclog.LoggerOptions{Name: "nomadhost", Level: level, Output: watched})
	stderr := &stderrLines{}

	cmd := exec.Command(bin)
	// The plugin's own log level, if not given: debug (but for the compiler's thousands of
	// timing lines), so that more kinds of lines go through go-plugin's reader. go-plugin
	// adds the host's environment and its own keys.
	if os.Getenv("PADDOCK_LOG") == "" {
		cmd.Env = []string{"PADDOCK_LOG=debug,cranelift_codegen=info,wasmtime_internal_cranelift=info"}
	}
	mu.Lock()
	pluginCm = cmd
	mu.Unlock()
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  handshake,
		Plugins:          map[string]plugin.Plugin{"base": driverPlugin{}, "driver": driverPlugin{}},
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           logger,
		Stderr:           stderr,
	})
	mu.Lock()
	goClient = client
	mu.Unlock()

	step("handshake")
	rpc, err := client.Client()
	if err != nil {
		fail("go-plugin could not start or connect to %s: %v", bin, err)
	}
	if v := client.NegotiatedVersion(); uint(v) != handshake.ProtocolVersion {
		fail("negotiated app protocol %d, asked for %d", v, handshake.ProtocolVersion)
	}
	if p := client.Protocol(); p != plugin.ProtocolGRPC {
		fail("protocol %q, not grpc", p)
	}
	rc := client.ReattachConfig()
	if rc == nil || rc.Addr == nil {
		fail("no reattach config (address and pid) after the handshake")
	}
	ok("app protocol %d, %s, %s %s, pid %d", client.NegotiatedVersion(), client.Protocol(), rc.Addr.Network(), rc.Addr.String(), rc.Pid)

	step("ping")
	if err := rpc.Ping(); err != nil {
		fail("grpc.health.v1 Check of %q: %v", plugin.GRPCServiceName, err)
	}
	ok("")

	step("dispense")
	raw, err := rpc.Dispense("driver")
	if err != nil {
		fail("%v", err)
	}
	dc, isDriver := raw.(*driverClient)
	if !isDriver {
		fail("Dispense gave a %T", raw)
	}
	ok("")

	step("plugin_info")
	ctx, cancel := rpcCtx(30 * time.Second)
	info, err := dc.base.PluginInfo(ctx, &base.PluginInfoRequest{})
	cancel()
	if err != nil {
		fail("%v", err)
	}
	if info.GetType() != base.PluginType_DRIVER {
		fail("type %v, not DRIVER", info.GetType())
	}
	hasAPI := false
	for _, v := range info.GetPluginApiVersions() {
		hasAPI = hasAPI || v == "v0.1.0"
	}
	if !hasAPI {
		fail("plugin_api_versions %q lacks v0.1.0, the one Nomad's drivers speak", info.GetPluginApiVersions())
	}
	if info.GetName() != *name {
		fail("name %q, not %q", info.GetName(), *name)
	}
	if !regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+`).MatchString(info.GetPluginVersion()) {
		fail("plugin_version %q is not a version Nomad parses", info.GetPluginVersion())
	}
	ok("%s %s, api %s", info.GetName(), info.GetPluginVersion(), strings.Join(info.GetPluginApiVersions(), ","))

	step("config_schema")
	ctx, cancel = rpcCtx(30 * time.Second)
	schema, err := dc.base.ConfigSchema(ctx, &base.ConfigSchemaRequest{})
	cancel()
	if err != nil {
		fail("%v", err)
	}
	root := schema.GetSpec().GetObject()
	if root == nil {
		fail("the config schema's root is not an object: %v", schema.GetSpec())
	}
	got := keys(root.GetAttributes())
	want := []string{}
	for k := range configType.AttributeTypes() {
		want = append(want, k)
	}
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		fail("the config schema's attributes are %v; this host encodes %v", got, want)
	}
	ok("%s", strings.Join(got, ","))

	step("set_config")
	dataDir := tempDir("nomadhost-data")
	config, err := mockConfig(dataDir)
	if err != nil {
		fail("go-cty msgpack: %v", err)
	}
	ctx, cancel = rpcCtx(30 * time.Second)
	_, err = dc.base.SetConfig(ctx, &base.SetConfigRequest{
		MsgpackConfig: config,
		NomadConfig: &base.NomadConfig{
			Driver: &base.NomadDriverConfig{ClientMinPort: 14000, ClientMaxPort: 14512},
		},
		PluginApiVersion: "v0.1.0",
	})
	cancel()
	if err != nil {
		fail("%v", err)
	}
	ok("%d bytes of cty msgpack", len(config))

	step("fingerprint")
	fpCtx, fpCancel := context.WithCancel(context.Background())
	fp, err := dc.driver.Fingerprint(fpCtx, &drivers.FingerprintRequest{})
	if err != nil {
		fail("%v", err)
	}
	type fpMsg struct {
		resp *drivers.FingerprintResponse
		err  error
	}
	fpCh := make(chan fpMsg, 1)
	go func() {
		for {
			resp, err := fp.Recv()
			fpCh <- fpMsg{resp, err}
			if err != nil {
				return
			}
		}
	}()
	var first fpMsg
	select {
	case first = <-fpCh:
	case <-time.After(10 * time.Second):
		fail("no first message within 10 s")
	}
	if first.err != nil {
		fail("the stream gave %v before any message", first.err)
	}
	if first.resp.GetHealth() != drivers.FingerprintResponse_HEALTHY {
		fail("first message %v: health %v, not HEALTHY", first.resp, first.resp.GetHealth())
	}
	if _, has := first.resp.GetAttributes()["driver.paddock"]; !has {
		fail("no driver.paddock attribute in %v", keys(first.resp.GetAttributes()))
	}
	// Nomad keeps the stream open for the plugin's life and takes its end as a failure.
	select {
	case m := <-fpCh:
		if m.err != nil {
			fail("the stream ended right after the first message: %v", m.err)
		}
	case <-time.After(300 * time.Millisecond):
	}
	ok("HEALTHY %q, %d attributes", first.resp.GetHealthDescription(), len(first.resp.GetAttributes()))

	step("capabilities")
	ctx, cancel = rpcCtx(30 * time.Second)
	caps, err := dc.driver.Capabilities(ctx, &drivers.CapabilitiesRequest{})
	cancel()
	if err != nil {
		fail("%v", err)
	}
	if caps.GetCapabilities() == nil {
		fail("no capabilities in the answer")
	}
	ok("send_signals %v, exec %v, fs_isolation %v", caps.GetCapabilities().GetSendSignals(),
		caps.GetCapabilities().GetExec(), caps.GetCapabilities().GetFsIsolation())

	step("task_config_schema")
	ctx, cancel = rpcCtx(30 * time.Second)
	tschema, err := dc.driver.TaskConfigSchema(ctx, &drivers.TaskConfigSchemaRequest{})
	cancel()
	if err != nil {
		fail("%v", err)
	}
	troot := tschema.GetSpec().GetObject()
	if troot == nil {
		fail("the task schema's root is not an object: %v", tschema.GetSpec())
	}
	if _, has := troot.GetAttributes()["run_for"]; !has {
		fail("the mock's task schema has no run_for: %v", keys(troot.GetAttributes()))
	}
	ok("%d attributes", len(troot.GetAttributes()))

	step("start_task")
	allocDir := tempDir("nomadhost-alloc")
	alloc, task := allocID(), "web"
	for _, d := range []string{"alloc/logs", "alloc/data", task + "/local", task + "/secrets", task + "/tmp"} {
		if err := os.MkdirAll(filepath.Join(allocDir, d), 0o755); err != nil {
			fail("the alloc dir: %v", err)
		}
	}
	taskID := fmt.Sprintf("%s/%s/%s", alloc, task, randomHex(8))
	driverConfig, err := taskConfig(map[string]cty.Value{"run_for": cty.StringVal("30s")})
	if err != nil {
		fail("go-cty msgpack: %v", err)
	}
	ctx, cancel = rpcCtx(30 * time.Second)
	started, err := dc.driver.StartTask(ctx, &drivers.StartTaskRequest{Task: &drivers.TaskConfig{
		Id:                  taskID,
		Name:                task,
		MsgpackDriverConfig: driverConfig,
		Env: map[string]string{
			"NOMAD_ALLOC_ID":  alloc,
			"NOMAD_TASK_NAME": task,
			"NOMAD_ALLOC_DIR": filepath.Join(allocDir, "alloc"),
			"NOMAD_TASK_DIR":  filepath.Join(allocDir, task, "local"),
		},
		Resources: &drivers.Resources{AllocatedResources: &drivers.AllocatedTaskResources{
			Cpu:    &drivers.AllocatedCpuResources{CpuShares: 100},
			Memory: &drivers.AllocatedMemoryResources{MemoryMb: 64},
		}},
		AllocDir:      allocDir,
		StdoutPath:    os.DevNull,
		StderrPath:    os.DevNull,
		TaskGroupName: "g",
		JobName:       "j",
		JobId:         "j",
		AllocId:       alloc,
		Namespace:     "default",
		NodeName:      "n1",
		NodeId:        allocID(),
	}})
	cancel()
	if err != nil {
		fail("%v", err)
	}
	if started.GetResult() != drivers.StartTaskResponse_SUCCESS {
		fail("result %v: %s", started.GetResult(), started.GetDriverErrorMsg())
	}
	handle := started.GetHandle()
	if handle == nil {
		fail("no task handle in the answer")
	}
	if handle.GetConfig().GetId() != taskID {
		fail("the handle's task id is %q, not %q", handle.GetConfig().GetId(), taskID)
	}
	if len(handle.GetDriverState()) == 0 {
		fail("the handle carries no driver_state (Nomad stores it to recover the task)")
	}
	ok("%s, handle v%d %v, %d bytes of driver state", taskID, handle.GetVersion(), handle.GetState(), len(handle.GetDriverState()))

	step("wait_task_blocks")
	type waitMsg struct {
		resp *drivers.WaitTaskResponse
		err  error
	}
	waitCh := make(chan waitMsg, 1)
	go func() {
		ctx, cancel := rpcCtx(time.Minute)
		defer cancel()
		resp, err := dc.driver.WaitTask(ctx, &drivers.WaitTaskRequest{TaskId: taskID})
		waitCh <- waitMsg{resp, err}
	}()
	select {
	case m := <-waitCh:
		fail("WaitTask returned while the task should run for 30 s: %v %v", m.resp, m.err)
	case <-time.After(300 * time.Millisecond):
	}
	ok("")

	step("exec_task")
	ctx, cancel = rpcCtx(30 * time.Second)
	execd, err := dc.driver.ExecTask(ctx, &drivers.ExecTaskRequest{
		TaskId: taskID, Command: []string{"sh", "-c", "echo from-exec; exit 3"}, Timeout: durationpb.New(10 * time.Second),
	})
	cancel()
	if err != nil {
		fail("%v", err)
	}
	if string(execd.GetStdout()) != "from-exec\n" || execd.GetResult().GetExitCode() != 3 {
		fail("stdout %q, exit code %d (want \"from-exec\\n\", 3)", execd.GetStdout(), execd.GetResult().GetExitCode())
	}
	ok("stdout %q, exit code %d", execd.GetStdout(), execd.GetResult().GetExitCode())

	step("exec_task_streaming")
	ctx, cancel = rpcCtx(30 * time.Second)
	stream, err := dc.driver.ExecTaskStreaming(ctx)
	if err != nil {
		fail("%v", err)
	}
	// As Nomad's client sends them: the setup, then the caller's input.
	for _, m := range []*drivers.ExecTaskStreamingRequest{
		{Setup: &drivers.ExecTaskStreamingRequest_Setup{TaskId: taskID, Command: []string{"sh"}}},
		{TtySize: &drivers.ExecTaskStreamingRequest_TerminalSize{Height: 24, Width: 80}},
		{Stdin: &drivers.ExecTaskStreamingIOOperation{Data: []byte("echo one\nexit 4\n")}},
	} {
		if err := stream.Send(m); err != nil {
			fail("send: %v", err)
		}
	}
	var out []byte
	exitCode := int32(-1)
	for {
		r, err := stream.Recv()
		if err != nil {
			// io.EOF: the driver ended the stream after the exit.
			if err.Error() != "EOF" {
				fail("recv: %v", err)
			}
			break
		}
		out = append(out, r.GetStdout().GetData()...)
		if r.GetExited() {
			exitCode = r.GetResult().GetExitCode()
		}
	}
	cancel()
	if string(out) != "one\n" || exitCode != 4 {
		fail("stdout %q, exit code %d (want \"one\\n\", 4)", out, exitCode)
	}
	ok("stdout %q, exit code %d", out, exitCode)

	step("stop_task")
	ctx, cancel = rpcCtx(30 * time.Second)
	_, err = dc.driver.StopTask(ctx, &drivers.StopTaskRequest{TaskId: taskID, Timeout: durationpb.New(2 * time.Second)})
	cancel()
	if err != nil {
		fail("%v", err)
	}
	ok("")

	step("wait_task")
	var waited waitMsg
	select {
	case waited = <-waitCh:
	case <-time.After(10 * time.Second):
		fail("WaitTask did not return within 10 s of StopTask")
	}
	if waited.err != nil {
		fail("%v", waited.err)
	}
	if waited.resp.GetErr() != "" {
		fail("err %q", waited.resp.GetErr())
	}
	exit := waited.resp.GetResult()
	if exit == nil {
		fail("no exit result in %v", waited.resp)
	}
	ok("exit code %d, signal %d", exit.GetExitCode(), exit.GetSignal())

	step("destroy_task")
	ctx, cancel = rpcCtx(30 * time.Second)
	_, err = dc.driver.DestroyTask(ctx, &drivers.DestroyTaskRequest{TaskId: taskID, Force: true})
	cancel()
	if err != nil {
		fail("%v", err)
	}
	ok("")

	step("kill")
	fpCancel()
	begun := time.Now()
	killed := make(chan struct{})
	go func() {
		client.Kill()
		close(killed)
	}()
	select {
	case <-killed:
	case <-time.After(15 * time.Second):
		fail("client.Kill did not return within 15 s: go-plugin waits for EOF on the plugin's stderr, so something still holds it open")
	}
	took := time.Since(begun)
	if watched.saw("error closing client during Kill") {
		fail("go-plugin's Close (GRPCController.Shutdown, then closing the connection) failed; see the log")
	}
	if watched.saw("plugin failed to exit gracefully") {
		fail("the plugin did not exit within 2 s of GRPCController.Shutdown; go-plugin SIGKILLed it (%v)", took)
	}
	ok("graceful, %v", took.Round(time.Millisecond))

	step("exited")
	if !client.Exited() {
		fail("go-plugin's client.Exited() is false after Kill")
	}
	if st := cmd.ProcessState; st == nil || !st.Success() {
		fail("the plugin's exit status: %v", st)
	}
	// As a Go plugin server closes its listener, which removes the socket file.
	if rc.Addr.Network() == "unix" {
		if _, err := os.Stat(rc.Addr.String()); err == nil {
			fail("the plugin exited but left its socket %s behind", rc.Addr.String())
		}
	}
	ok("%v", cmd.ProcessState)

	step("plugin_log")
	lines := stderr.lines()
	for i, line := range lines {
		if err := checkLogLine(line); err != nil {
			fail("stderr line %d of %d: %v: %s", i+1, len(lines), err, line)
		}
	}
	ok("%d lines, each an hclog JSON entry go-plugin reads", len(lines))

	mu.Lock()
	for _, d := range tempDirs {
		_ = os.RemoveAll(d)
	}
	mu.Unlock()
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
