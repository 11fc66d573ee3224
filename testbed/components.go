package main

// The child processes the supervisor starts: one Kubernetes component each, because a component
// command sets up process-wide state (signal handlers, flags, metrics registries) that cannot be
// built twice in one process. Each takes the component's own flags, exactly as its real binary
// would, and exits when the supervisor goes away.

import (
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // CronJob time zones, as the real binaries embed them

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kwokconfig "sigs.k8s.io/kwok/pkg/config"
	kwokcmd "sigs.k8s.io/kwok/pkg/kwok/cmd"
	kwoklog "sigs.k8s.io/kwok/pkg/log"
	kwoksignals "sigs.k8s.io/kwok/pkg/utils/signals"
)

// runComponent runs a Kubernetes component command on the given flags and returns its exit code.
func runComponent(command *cobra.Command, args []string) int {
	command.SetArgs(args)
	return cli.Run(command)
}

func runAPIServer(args []string) int {
	return runComponent(apiserver.NewAPIServerCommand(), args)
}

func runControllerManager(args []string) int {
	return runComponent(controllermanager.NewControllerManagerCommand(), args)
}

func runScheduler(args []string) int {
	return runComponent(scheduler.NewSchedulerCommand(), args)
}

// runKwok runs kwok's controller as its own binary does; kwok reads its flags (and its stages
// file, --config) from os.Args, so the subcommand name is taken out of them first.
func runKwok(args []string) int {
	os.Args = append([]string{os.Args[0]}, args...)
	flagset := pflag.NewFlagSet("global", pflag.ContinueOnError)
	flagset.ParseErrorsAllowlist.UnknownFlags = true
	flagset.Usage = func() {}
	ctx := kwoksignals.SetupSignalContext()
	ctx, logger := kwoklog.InitFlags(ctx, flagset)
	ctx, err := kwokconfig.InitFlags(ctx, flagset)
	if err != nil {
		logger.Error("kwok configuration", "err", err)
		return 1
	}
	command := kwokcmd.NewCommand(ctx)
	// Kubernetes' components register a global --version flag of their own type in this
	// binary; cobra's boolean --version for kwok would clash with it.
	command.Version = ""
	command.PersistentFlags().AddFlagSet(flagset)
	command.SetArgs(args)
	if err := command.ExecuteContext(ctx); err != nil {
		logger.Error("kwok", "err", err)
		return 1
	}
	return 0
}

// runEtcd serves one embedded etcd on loopback: `testbed etcd DATA_DIR CLIENT_PORT PEER_PORT`.
// Every member's API server keeps its objects in it under a prefix of its own.
func runEtcd(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: testbed etcd DATA_DIR CLIENT_PORT PEER_PORT")
		return 2
	}
	cfg := embed.NewConfig()
	cfg.Name = "testbed"
	cfg.Dir = args[0]
	client, err := url.Parse("http://127.0.0.1:" + args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	peer, err := url.Parse("http://127.0.0.1:" + args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg.ListenClientUrls = []url.URL{*client}
	cfg.AdvertiseClientUrls = []url.URL{*client}
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "warn"
	// A test bed's data dies with it: skipping fsync makes every write much cheaper.
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		return 1
	}
	defer e.Close()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		return 1
	case <-stop:
		return 0
	}
	select {
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		return 1
	case <-stop:
		return 0
	}
}
