package main

// The fake nodes: Node objects with the capacity, allocatable, labels and taints the fleet file
// asks for, named and labelled as `gitfleet sim` names and labels them (`<member>-<pool>-<i>`).
// kwok manages those that carry its annotation: it makes them Ready, renews their leases and
// runs the pods bound to them. A group with `ready: false` is left to the node lifecycle
// controller, as a node whose kubelet never reported.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	kwokAnnotation      = "kwok.x-k8s.io/node"
	kwokAnnotationValue = "fake"
)

func nodeObjects(spec memberSpec) []*corev1.Node {
	var out []*corev1.Node
	for g, group := range spec.Nodes {
		pool := group.poolName(g)
		for i := 0; i < group.count(); i++ {
			name := fmt.Sprintf("%s-%s-%d", spec.Name, pool, i)
			labels := map[string]string{
				"agentpool":                     pool,
				"beta.kubernetes.io/arch":       "amd64",
				"beta.kubernetes.io/os":         "linux",
				"kubernetes.io/arch":            "amd64",
				"kubernetes.io/hostname":        name,
				"kubernetes.io/os":              "linux",
				"kubernetes.io/role":            "agent",
				"node-role.kubernetes.io/agent": "",
				"type":                          "kwok",
			}
			if group.InstanceType != "" {
				labels["node.kubernetes.io/instance-type"] = group.InstanceType
				labels["beta.kubernetes.io/instance-type"] = group.InstanceType
			}
			for k, v := range group.Labels {
				labels[k] = v
			}
			annotations := map[string]string{"node.alpha.kubernetes.io/ttl": "0"}
			if group.ready() {
				annotations[kwokAnnotation] = kwokAnnotationValue
			}
			var taints []corev1.Taint
			for _, t := range group.Taints {
				taints = append(taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
			}
			pods := resource.MustParse(fmt.Sprint(group.pods()))
			out = append(out, &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
				Spec: corev1.NodeSpec{
					ProviderID:    fmt.Sprintf("kwok://%s/%s", spec.Name, name),
					Taints:        taints,
					Unschedulable: group.Unschedulable,
				},
				Status: corev1.NodeStatus{
					// Validated by loadFleet, so MustParse cannot panic.
					Capacity: corev1.ResourceList{
						corev1.ResourceCPU:    resource.MustParse(group.cpu()),
						corev1.ResourceMemory: resource.MustParse(group.memory()),
						corev1.ResourcePods:   pods,
					},
					Allocatable: corev1.ResourceList{
						corev1.ResourceCPU:    resource.MustParse(group.allocCPU()),
						corev1.ResourceMemory: resource.MustParse(group.allocMem()),
						corev1.ResourcePods:   pods,
					},
				},
			})
		}
	}
	return out
}

func createNodes(ctx context.Context, client kubernetes.Interface, spec memberSpec) error {
	for _, n := range nodeObjects(spec) {
		created, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create node %s: %w", n.Name, err)
		}
		// A create may drop status; write capacity and allocatable through the status
		// subresource as a kubelet does.
		created.Status.Capacity = n.Status.Capacity
		created.Status.Allocatable = n.Status.Allocatable
		if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("node %s status: %w", n.Name, err)
		}
	}
	return nil
}

// awaitNodesReady waits until every node kwok manages reports Ready.
func awaitNodesReady(ctx context.Context, client kubernetes.Interface, spec memberSpec) error {
	var want []string
	for _, n := range nodeObjects(spec) {
		if n.Annotations[kwokAnnotation] == kwokAnnotationValue {
			want = append(want, n.Name)
		}
	}
	return pollUntil(ctx, func() (bool, error) {
		for _, name := range want {
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			ready := false
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready = true
				}
			}
			if !ready {
				return false, nil
			}
		}
		return true, nil
	})
}
