package main

// The fleet file, in the format `gitfleet sim --fleet` reads
// (crates/gitfleet-sim/src/fleet_file.rs), so a test describes its members once and runs them on
// either backend. The test bed honours what a real control plane can honour: member names and
// contexts, ports, and node pools (count, cpu, memory, allocatable, pods, instance type, labels,
// taints, ready, unschedulable). What only a simulator can do (injected faults, bearer tokens, a
// chosen Kubernetes version) is ignored with a note on stderr.

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

type fleetFile struct {
	Seed              uint64       `json:"seed,omitempty"`
	AnonymousAuth     bool         `json:"anonymousAuth,omitempty"`
	KubernetesVersion string       `json:"kubernetesVersion,omitempty"`
	Members           []memberSpec `json:"members"`
}

type memberSpec struct {
	Name              string      `json:"name"`
	Context           string      `json:"context,omitempty"`
	Token             string      `json:"token,omitempty"`
	Port              int         `json:"port,omitempty"`
	AnonymousAuth     *bool       `json:"anonymousAuth,omitempty"`
	KubernetesVersion string      `json:"kubernetesVersion,omitempty"`
	WorkloadDelayMs   *uint64     `json:"workloadDelayMs,omitempty"`
	Nodes             []nodeGroup `json:"nodes,omitempty"`
	Faults            *faults     `json:"faults,omitempty"`
}

type nodeGroup struct {
	Count             *int              `json:"count,omitempty"`
	Pool              string            `json:"pool,omitempty"`
	CPU               string            `json:"cpu,omitempty"`
	Memory            string            `json:"memory,omitempty"`
	AllocatableCPU    string            `json:"allocatableCpu,omitempty"`
	AllocatableMemory string            `json:"allocatableMemory,omitempty"`
	Pods              *int              `json:"pods,omitempty"`
	InstanceType      string            `json:"instanceType,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Taints            []taint           `json:"taints,omitempty"`
	Ready             *bool             `json:"ready,omitempty"`
	Unschedulable     bool              `json:"unschedulable,omitempty"`
}

type taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

type faults struct {
	LatencyMs  uint64  `json:"latencyMs,omitempty"`
	ErrorRate  float64 `json:"errorRate,omitempty"`
	ErrorCodes []int   `json:"errorCodes,omitempty"`
	Down       bool    `json:"down,omitempty"`
}

func (m memberSpec) contextName() string {
	if m.Context != "" {
		return m.Context
	}
	return m.Name
}

// Defaults as in the simulator's fleet file.
func (g nodeGroup) count() int {
	if g.Count == nil {
		return 1
	}
	return *g.Count
}

func (g nodeGroup) poolName(index int) string {
	if g.Pool != "" {
		return g.Pool
	}
	return fmt.Sprintf("pool%d", index+1)
}

func (g nodeGroup) cpu() string      { return orDefault(g.CPU, "4") }
func (g nodeGroup) memory() string   { return orDefault(g.Memory, "16Gi") }
func (g nodeGroup) allocCPU() string { return orDefault(g.AllocatableCPU, g.cpu()) }
func (g nodeGroup) allocMem() string { return orDefault(g.AllocatableMemory, g.memory()) }
func (g nodeGroup) ready() bool      { return g.Ready == nil || *g.Ready }
func (g nodeGroup) pods() int {
	if g.Pods == nil {
		return 110
	}
	return *g.Pods
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

// loadFleet reads and validates a fleet file; every problem is reported at once, each naming
// its field, as the simulator does.
func loadFleet(path string) (*fleetFile, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read fleet file %s: %w", path, err)
	}
	var f fleetFile
	if err := yaml.UnmarshalStrict(text, &f); err != nil {
		return nil, fmt.Errorf("fleet file %s is not valid YAML for a fleet: %w", path, err)
	}
	if problems := f.problems(); len(problems) > 0 {
		return nil, fmt.Errorf("fleet file %s has %d problem(s):\n  %s", path, len(problems), strings.Join(problems, "\n  "))
	}
	for i, m := range f.Members {
		var ignored []string
		if m.Token != "" {
			ignored = append(ignored, "token (members use a client certificate)")
		}
		if m.AnonymousAuth != nil {
			ignored = append(ignored, "anonymousAuth")
		}
		if m.KubernetesVersion != "" {
			ignored = append(ignored, "kubernetesVersion (the members run the built version)")
		}
		if m.Faults != nil && (m.Faults.LatencyMs != 0 || m.Faults.ErrorRate != 0 || m.Faults.Down) {
			ignored = append(ignored, "faults (real API servers fail for real only; the admin endpoint stops a member)")
		}
		if m.WorkloadDelayMs != nil {
			ignored = append(ignored, "workloadDelayMs (the real controllers and kwok set the pace)")
		}
		if len(ignored) > 0 {
			fmt.Fprintf(os.Stderr, "testbed: members[%d] (%s): ignoring %s\n", i, m.Name, strings.Join(ignored, ", "))
		}
	}
	return &f, nil
}

func (f *fleetFile) problems() []string {
	var out []string
	if len(f.Members) == 0 {
		out = append(out, "members: at least one member is required")
	}
	names := map[string]bool{}
	contexts := map[string]bool{}
	ports := map[int]bool{}
	for i, m := range f.Members {
		at := fmt.Sprintf("members[%d]", i)
		if !isDNSLabel(m.Name) {
			out = append(out, fmt.Sprintf("%s.name: %q must be a DNS label (lowercase letters, digits, '-')", at, m.Name))
		}
		if names[m.Name] {
			out = append(out, fmt.Sprintf("%s.name: %q appears twice", at, m.Name))
		}
		names[m.Name] = true
		if ctx := m.contextName(); contexts[ctx] {
			out = append(out, fmt.Sprintf("%s.context: %q appears twice", at, ctx))
		} else {
			contexts[ctx] = true
		}
		if m.Port != 0 {
			if ports[m.Port] {
				out = append(out, fmt.Sprintf("%s.port: %d appears twice", at, m.Port))
			}
			ports[m.Port] = true
		}
		pools := map[string]bool{}
		for j, g := range m.Nodes {
			at := fmt.Sprintf("%s.nodes[%d]", at, j)
			pool := g.poolName(j)
			if !isDNSLabel(pool) {
				out = append(out, fmt.Sprintf("%s.pool: %q must be a DNS label", at, pool))
			}
			if pools[pool] {
				out = append(out, fmt.Sprintf("%s.pool: %q appears twice", at, pool))
			}
			pools[pool] = true
			if g.count() < 0 {
				out = append(out, fmt.Sprintf("%s.count: must not be negative", at))
			}
			for _, q := range []struct{ field, value string }{
				{"cpu", g.cpu()}, {"memory", g.memory()},
				{"allocatableCpu", g.allocCPU()}, {"allocatableMemory", g.allocMem()},
			} {
				parsed, err := resource.ParseQuantity(q.value)
				if err != nil {
					out = append(out, fmt.Sprintf("%s.%s: %q is not a quantity: %v", at, q.field, q.value, err))
				} else if parsed.Sign() < 0 {
					out = append(out, fmt.Sprintf("%s.%s: %q must not be negative", at, q.field, q.value))
				}
			}
			for k, t := range g.Taints {
				switch t.Effect {
				case "NoSchedule", "PreferNoSchedule", "NoExecute":
				default:
					out = append(out, fmt.Sprintf("%s.taints[%d].effect: %q is not NoSchedule, PreferNoSchedule or NoExecute", at, k, t.Effect))
				}
			}
		}
	}
	return out
}

func isDNSLabel(s string) bool {
	if s == "" || len(s) > 63 || strings.HasPrefix(s, "-") || strings.HasSuffix(s, "-") {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
