// Command testbed runs real Kubernetes members on loopback for gitfleet's tests: per member a
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok (fake nodes that run pods),
// all sharing one embedded etcd. `testbed up` is the supervisor; the other subcommands are the
// child processes it starts (one component per process).
package main

import (
	"fmt"
	"os"
)

const usage = `usage:
  testbed up --fleet FLEET.yaml --kubeconfig-out KUBECONFIG [--state-dir DIR] [--admin ADDR] [--exit-on-stdin-eof]

The fleet file has the format of ` + "`gitfleet sim --fleet`" + `. The other subcommands (etcd,
apiserver, controller-manager, scheduler, kwok) are the child processes ` + "`up`" + ` starts.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	args := os.Args[2:]
	child := func(run func([]string) int) int {
		// A child never outlives the supervisor.
		watchParent(func() { os.Exit(1) })
		return run(args)
	}
	var code int
	switch os.Args[1] {
	case "up":
		code = runUp(args)
	case "etcd":
		code = child(runEtcd)
	case "apiserver":
		code = child(runAPIServer)
	case "controller-manager":
		code = child(runControllerManager)
	case "scheduler":
		code = child(runScheduler)
	case "kwok":
		code = child(runKwok)
	case "-h", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "testbed: unknown subcommand %q\n%s", os.Args[1], usage)
		code = 2
	}
	os.Exit(code)
}
