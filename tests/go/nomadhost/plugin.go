package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"github.com/zclconf/go-cty/cty"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"
	"google.golang.org/grpc"

	"nomadproto/base"
	"nomadproto/drivers"
)

// The handshake Nomad's loader uses for external plugins; go-plugin puts the cookie and the
// protocol version in the child's environment.
var handshake = plugin.HandshakeConfig{
	ProtocolVersion:  2,
	MagicCookieKey:   "NOMAD_PLUGIN_MAGIC_COOKIE",
	MagicCookieValue: "e4327c2e01eabfd75a8a67adb114fb34a757d57eee7728d857a8cec6e91a7255",
}

// driverPlugin is the client half of a task-driver plugin: what Dispense hands back is a
// pair of generated gRPC clients on go-plugin's connection, as Nomad's own driver plugin
// type wraps them. There is no server half here.
type driverPlugin struct {
	plugin.NetRPCUnsupportedPlugin
}

type driverClient struct {
	base   base.BasePluginClient
	driver drivers.DriverClient
	// Cancelled by go-plugin when the plugin process goes away.
	done context.Context
}

func (driverPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return errors.New("nomadhost is a host only; it serves no plugin")
}

func (driverPlugin) GRPCClient(ctx context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (interface{}, error) {
	return &driverClient{
		base:   base.NewBasePluginClient(conn),
		driver: drivers.NewDriverClient(conn),
		done:   ctx,
	}, nil
}

// The plugin's config as Nomad's loader would hand it over: the agent's `plugin` block
// decoded against the plugin's ConfigSchema by hcldec, so every attribute of the schema is
// present and the ones not written are null of their type (a block not written is a null
// object, an `any` attribute not written is a null of the dynamic type).
var (
	grantType = cty.Object(map[string]cty.Type{
		"env":              cty.Bool,
		"devices":          cty.Bool,
		"events":           cty.Bool,
		"process":          cty.List(cty.String),
		"task_dir":         cty.Bool,
		"variables":        cty.Bool,
		"isolation":        cty.Bool,
		"loader_env":       cty.List(cty.String),
		"chroot_env":       cty.DynamicPseudoType,
		"denied_host_uids": cty.String,
		"denied_host_gids": cty.String,
		"pids_max":         cty.Number,
	})
	limitsType = cty.Object(map[string]cty.Type{
		"memory_mb":            cty.Number,
		"call_timeout":         cty.String,
		"instance_reuse":       cty.Number,
		"max_concurrent_calls": cty.Number,
	})
	configType = cty.Object(map[string]cty.Type{
		"driver":             cty.String,
		"driver_file":        cty.String,
		"driver_sha256":      cty.String,
		"data_dir":           cty.String,
		"components":         cty.List(cty.String),
		"task_config_fields": cty.List(cty.String),
		"verify_key":         cty.String,
		"component_config":   cty.DynamicPseudoType,
		"grant":              grantType,
		"limits":             limitsType,
	})
)

// mockConfig: the mock driver, its data under dataDir, allowed to emit task events.
func mockConfig(dataDir string) ([]byte, error) {
	val := cty.ObjectVal(map[string]cty.Value{
		"driver":             cty.StringVal("mock"),
		"driver_file":        cty.NullVal(cty.String),
		"driver_sha256":      cty.NullVal(cty.String),
		"data_dir":           cty.StringVal(dataDir),
		"components":         cty.NullVal(cty.List(cty.String)),
		"task_config_fields": cty.NullVal(cty.List(cty.String)),
		"verify_key":         cty.NullVal(cty.String),
		"component_config":   cty.NullVal(cty.DynamicPseudoType),
		"grant": cty.ObjectVal(map[string]cty.Value{
			"env":              cty.NullVal(cty.Bool),
			"devices":          cty.NullVal(cty.Bool),
			"events":           cty.True,
			"process":          cty.NullVal(cty.List(cty.String)),
			"task_dir":         cty.NullVal(cty.Bool),
			"variables":        cty.NullVal(cty.Bool),
			"isolation":        cty.NullVal(cty.Bool),
			"loader_env":       cty.NullVal(cty.List(cty.String)),
			"chroot_env":       cty.NullVal(cty.DynamicPseudoType),
			"denied_host_uids": cty.NullVal(cty.String),
			"denied_host_gids": cty.NullVal(cty.String),
			"pids_max":         cty.NullVal(cty.Number),
		}),
		"limits": cty.NullVal(limitsType),
	})
	return ctymsgpack.Marshal(val, configType)
}

// taskConfig encodes a job's `config` block as the task runner does: hcldec against the
// task schema (whose attributes are all `any`) gives an object of exactly the attributes
// written, with their own types, and it is marshalled with that type.
func taskConfig(attrs map[string]cty.Value) ([]byte, error) {
	val := cty.ObjectVal(attrs)
	return ctymsgpack.Marshal(val, val.Type())
}

// stderrLines collects the plugin's raw stderr, which go-plugin copies line by line into
// ClientConfig.Stderr before it parses each line as an hclog JSON entry.
type stderrLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *stderrLines) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *stderrLines) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	text := strings.TrimRight(s.buf.String(), "\n")
	if text == "" {
		return nil
	}
	return strings.Split(text, "\n")
}

// hclogLevels are the levels go-plugin's host maps a line to (hclog.LevelFromString);
// any other value makes the line a levelless one, re-logged raw at debug.
var hclogLevels = map[string]bool{"trace": true, "debug": true, "info": true, "warn": true, "error": true}

// checkLogLine says why go-plugin would not take line as an hclog entry with a level, or
// why reading it would panic the host (its reader asserts the three keys are strings).
func checkLogLine(line string) error {
	var raw map[string]interface{}
	if err := json.Unmarshal([]byte(line), &raw); err != nil {
		return fmt.Errorf("not a JSON object (%v), so go-plugin logs it raw at debug", err)
	}
	for _, key := range []string{"@message", "@level", "@timestamp"} {
		v, present := raw[key]
		if !present {
			if key == "@timestamp" {
				continue
			}
			return fmt.Errorf("no %s, so go-plugin logs the line raw at debug or with an empty message", key)
		}
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s is %T, not a string: go-plugin's reader would panic", key, v)
		}
	}
	if level := raw["@level"].(string); !hclogLevels[strings.ToLower(strings.TrimSpace(level))] {
		return fmt.Errorf("@level %q is not one hclog knows, so go-plugin logs the line raw at debug", level)
	}
	if ts, ok := raw["@timestamp"].(string); ok {
		if _, err := time.Parse("2006-01-02T15:04:05.000000Z07:00", ts); err != nil {
			return fmt.Errorf("@timestamp %q does not parse with go-plugin's layout (%v), so the line is logged raw at debug", ts, err)
		}
	}
	return nil
}

// watchedOutput is the host logger's output: copied to stderr, and searched for what
// go-plugin only logs (a plugin that had to be SIGKILLed after Shutdown).
type watchedOutput struct {
	mu      sync.Mutex
	out     io.Writer
	partial string
	seen    map[string]bool
}

func newWatchedOutput() *watchedOutput {
	return &watchedOutput{out: os.Stderr, seen: map[string]bool{}}
}

var watchedPhrases = []string{
	"plugin failed to exit gracefully",
	"error closing client during Kill",
}

func (w *watchedOutput) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	text := w.partial + string(p)
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		for _, phrase := range watchedPhrases {
			if strings.Contains(text[:i], phrase) {
				w.seen[phrase] = true
			}
		}
		w.partial = text[i+1:]
	} else {
		w.partial = text
	}
	return w.out.Write(p)
}

func (w *watchedOutput) saw(phrase string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen[phrase] || strings.Contains(w.partial, phrase)
}
