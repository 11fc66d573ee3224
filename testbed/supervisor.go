package main

// `testbed up`: the supervisor. It makes the lab's keys, starts one embedded etcd shared by all
// members (each member's API server keeps its objects under a prefix of its own), then for each
// member a kube-apiserver, its nodes, kube-controller-manager, kube-scheduler and kwok; it waits
// until every API server answers /readyz and every node kwok manages is Ready, writes the
// kubeconfig, prints a `ready` line and serves its admin endpoint until SIGINT/SIGTERM, the end
// of its standard input (with --exit-on-stdin-eof) or the death of the process that started it.
// Any component that ends unexpectedly takes the whole test bed down with its log's tail.

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodelease "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

// How long a member may take to come up before the start fails: a bound on a hang on a busy
// two-core machine, not a timing assumption (the supervisor waits on conditions).
const startTimeout = 5 * time.Minute

// How long a component gets to stop on SIGTERM before it is killed (an API server stops listening
// at once but can take longer to end; nothing it would still do matters to a test bed).
const stopGrace = 3 * time.Second

type member struct {
	spec       memberSpec
	port       int
	dir        string
	kubeconfig string // the components' kubeconfig
	apiserver  *proc
	components []*proc

	mu   sync.Mutex // serialises stop/start through the admin endpoint
	down bool
}

func (m *member) server() string { return fmt.Sprintf("https://127.0.0.1:%d", m.port) }

type supervisor struct {
	state   string
	pki     *pki
	spawner *spawner
	etcd    *proc
	members []*member
	http    *http.Client
}

func runUp(args []string) int {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	fleetPath := fs.String("fleet", "", "fleet file (the format of `gitfleet sim --fleet`)")
	kubeconfigOut := fs.String("kubeconfig-out", "", "where to write the kubeconfig with one context per member")
	stateDir := fs.String("state-dir", "", "folder for keys, etcd data and logs (default: a temporary folder removed at exit)")
	admin := fs.String("admin", "127.0.0.1:0", "loopback address of the admin endpoint")
	stdinEOF := fs.Bool("exit-on-stdin-eof", false, "stop when standard input closes (for test harnesses)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *fleetPath == "" || *kubeconfigOut == "" {
		fmt.Fprintln(os.Stderr, "usage: testbed up --fleet FLEET.yaml --kubeconfig-out KUBECONFIG [--state-dir DIR] [--admin ADDR] [--exit-on-stdin-eof]")
		return 2
	}
	fleet, err := loadFleet(*fleetPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testbed: %v\n", err)
		return 2
	}
	state, temporary := *stateDir, false
	if state == "" {
		if state, err = os.MkdirTemp("", "gitfleet-testbed-"); err != nil {
			fmt.Fprintf(os.Stderr, "testbed: %v\n", err)
			return 1
		}
		temporary = true
	}
	if temporary {
		defer os.RemoveAll(state)
	}

	quit := make(chan string, 4)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() { quit <- fmt.Sprintf("received %v", <-signals) }()
	if *stdinEOF {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			quit <- "standard input closed"
		}()
	}
	watchParent(func() { quit <- "the parent process ended" })

	s, err := newSupervisor(state, fleet)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testbed: %v\n", err)
		return 1
	}
	defer s.shutdown()

	started := time.Now()
	startErr := make(chan error, 1)
	go func() { startErr <- s.start() }()
	select {
	case err := <-startErr:
		if err != nil {
			fmt.Fprintf(os.Stderr, "testbed: %v\n", err)
			return 1
		}
	case p := <-s.spawner.exits:
		fmt.Fprintf(os.Stderr, "testbed: %v\n", p.failure())
		return 1
	case why := <-quit:
		fmt.Fprintf(os.Stderr, "testbed: stopping during start: %s\n", why)
		return 1
	}
	if err := s.writeKubeconfig(*kubeconfigOut); err != nil {
		fmt.Fprintf(os.Stderr, "testbed: kubeconfig %s: %v\n", *kubeconfigOut, err)
		return 1
	}
	listener, err := net.Listen("tcp", *admin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testbed: admin endpoint %s: %v\n", *admin, err)
		return 1
	}
	go func() { _ = http.Serve(listener, s.adminHandler()) }()

	width := 0
	for _, m := range s.members {
		width = max(width, len(m.spec.contextName()))
	}
	out := bufio.NewWriter(os.Stdout)
	for _, m := range s.members {
		fmt.Fprintf(out, "  %-*s  %s\n", width, m.spec.contextName(), m.server())
	}
	fmt.Fprintf(out, "kubeconfig: %s\n", *kubeconfigOut)
	fmt.Fprintf(out, "state: %s\n", state)
	fmt.Fprintf(out, "admin: http://%s/members\n", listener.Addr())
	fmt.Fprintf(out, "testbed: ready, %d member(s) in %.1fs; Ctrl-C stops\n", len(s.members), time.Since(started).Seconds())
	_ = out.Flush()

	for {
		select {
		case p := <-s.spawner.exits:
			fmt.Fprintf(os.Stderr, "testbed: %v\n", p.failure())
			return 1
		case why := <-quit:
			fmt.Fprintf(os.Stderr, "testbed: stopping: %s\n", why)
			return 0
		}
	}
}

func newSupervisor(state string, fleet *fleetFile) (*supervisor, error) {
	for _, d := range []string{"logs", "etcd"} {
		if err := os.MkdirAll(filepath.Join(state, d), 0o700); err != nil {
			return nil, err
		}
	}
	p, err := makePKI(filepath.Join(state, "pki"))
	if err != nil {
		return nil, fmt.Errorf("lab certificates: %w", err)
	}
	sp, err := newSpawner()
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM)
	cert, err := tls.X509KeyPair(p.adminCertPEM, p.adminKeyPEM)
	if err != nil {
		return nil, err
	}
	s := &supervisor{
		state: state, pki: p, spawner: sp,
		http: &http.Client{
			Timeout:   5 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}},
		},
	}
	for _, spec := range fleet.Members {
		port := spec.Port
		if port == 0 {
			if port, err = freePort(); err != nil {
				return nil, err
			}
		}
		dir := filepath.Join(state, "members", spec.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		m := &member{spec: spec, port: port, dir: dir, kubeconfig: filepath.Join(dir, "kubeconfig")}
		if err := os.WriteFile(m.kubeconfig, s.kubeconfigYAML([]*member{m}, ""), 0o600); err != nil {
			return nil, err
		}
		s.members = append(s.members, m)
	}
	return s, nil
}

func (s *supervisor) newProc(name string, args ...string) *proc {
	return &proc{name: name, args: args, logPath: logPath(s.state, name)}
}

// start brings up etcd, then every member in parallel.
func (s *supervisor) start() error {
	clientPort, err := freePort()
	if err != nil {
		return err
	}
	peerPort, err := freePort()
	if err != nil {
		return err
	}
	s.etcd = s.newProc("etcd", "etcd", filepath.Join(s.state, "etcd"), fmt.Sprint(clientPort), fmt.Sprint(peerPort))
	if err := s.spawner.start(s.etcd); err != nil {
		return err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	if err := s.await("etcd to be healthy", s.etcd, func() bool {
		resp, err := http.Get(etcdURL + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}); err != nil {
		return err
	}
	stages := filepath.Join(s.state, "kwok-stages.yaml")
	if err := os.WriteFile(stages, []byte(strings.Join([]string{
		nodefast.DefaultNodeInit, nodelease.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady, podfast.DefaultPodComplete, podfast.DefaultPodDelete,
	}, "\n---\n")), 0o600); err != nil {
		return err
	}
	errs := make(chan error, len(s.members))
	for _, m := range s.members {
		go func() { errs <- s.startMember(m, etcdURL, stages) }()
	}
	var all []error
	for range s.members {
		if err := <-errs; err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

func (s *supervisor) startMember(m *member, etcdURL, stages string) error {
	name := m.spec.Name
	m.apiserver = s.newProc(name+"/kube-apiserver", append([]string{"apiserver"}, s.apiserverFlags(m, etcdURL)...)...)
	if err := s.startAPIServer(m); err != nil {
		return err
	}
	client, err := s.client(m)
	if err != nil {
		return err
	}
	if err := createNodes(context.Background(), client, m.spec); err != nil {
		return fmt.Errorf("%s: nodes: %w", name, err)
	}
	m.components = []*proc{
		s.newProc(name+"/kube-controller-manager", "controller-manager",
			"--kubeconfig="+m.kubeconfig,
			"--leader-elect=false",
			"--secure-port=0",
			"--controllers=*",
			"--root-ca-file="+s.pki.path("ca.crt"),
			"--service-account-private-key-file="+s.pki.path("sa.key"),
			"--cluster-signing-cert-file="+s.pki.path("ca.crt"),
			"--cluster-signing-key-file="+s.pki.path("ca.key"),
			"--use-service-account-credentials=false",
			"--v=1"),
		s.newProc(name+"/kube-scheduler", "scheduler",
			"--kubeconfig="+m.kubeconfig,
			"--leader-elect=false",
			"--secure-port=0",
			"--v=1"),
		s.newProc(name+"/kwok", "kwok",
			"--kubeconfig="+m.kubeconfig,
			"--config="+stages,
			"--manage-nodes-with-annotation-selector="+kwokAnnotation+"="+kwokAnnotationValue,
			"--node-lease-duration-seconds=40",
			"--cidr=10.0.0.0/16"),
	}
	for _, p := range m.components {
		if err := s.spawner.start(p); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := awaitNodesReady(ctx, client, m.spec); err != nil {
		return fmt.Errorf("%s: nodes did not become Ready: %w", name, err)
	}
	// The service-account controller makes `default` in every namespace; a cluster where it
	// exists is one whose controller manager works.
	if err := awaitServiceAccount(ctx, client); err != nil {
		return fmt.Errorf("%s: the controller manager did not create the default ServiceAccount: %w", name, err)
	}
	return nil
}

func (s *supervisor) apiserverFlags(m *member, etcdURL string) []string {
	return []string{
		"--etcd-servers=" + etcdURL,
		"--etcd-prefix=/registry/" + m.spec.Name,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", m.port),
		"--cert-dir=" + filepath.Join(m.dir, "certs"),
		"--tls-cert-file=" + s.pki.path("serving.crt"),
		"--tls-private-key-file=" + s.pki.path("serving.key"),
		"--client-ca-file=" + s.pki.path("ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + s.pki.path("sa.pub"),
		"--service-account-signing-key-file=" + s.pki.path("sa.key"),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.96.0.0/16",
		// The loopback advertise address cannot be an Endpoints address; nothing reaches the
		// `kubernetes` Service in a lab without a network anyway.
		"--endpoint-reconciler-type=none",
		"--v=1",
	}
}

// startAPIServer starts (or restarts) a member's API server and waits for /readyz.
func (s *supervisor) startAPIServer(m *member) error {
	if err := s.spawner.start(m.apiserver); err != nil {
		return err
	}
	return s.await(m.spec.Name+"'s API server to be ready", m.apiserver, func() bool {
		resp, err := s.http.Get(m.server() + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// await polls `ready` until it holds, failing early when `p` ends and after startTimeout.
func (s *supervisor) await(what string, p *proc, ready func() bool) error {
	deadline := time.Now().Add(startTimeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !ready() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s; the end of %s:\n%s", startTimeout, what, p.logPath, tail(p.logPath, 30))
		}
		select {
		case <-p.exited():
			return fmt.Errorf("waiting for %s: %w", what, p.failure())
		case <-tick.C:
		}
	}
	return nil
}

func (s *supervisor) restConfig(m *member) *rest.Config {
	return &rest.Config{
		Host: m.server(),
		TLSClientConfig: rest.TLSClientConfig{
			CAData: s.pki.caPEM, CertData: s.pki.adminCertPEM, KeyData: s.pki.adminKeyPEM,
		},
		QPS: 50, Burst: 100,
	}
}

func (s *supervisor) client(m *member) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(s.restConfig(m))
}

// kubeconfigYAML is the kubeconfig for `members`, shaped as `gitfleet sim --kubeconfig-out`
// writes it: one cluster, user and context per member, all named like the member's context,
// namespace `default`, the first member current. The user is the lab's admin client certificate.
func (s *supervisor) kubeconfigYAML(members []*member, header string) []byte {
	cfg := clientcmdapi.NewConfig()
	for _, m := range members {
		ctx := m.spec.contextName()
		cfg.Clusters[ctx] = &clientcmdapi.Cluster{Server: m.server(), CertificateAuthorityData: s.pki.caPEM}
		cfg.AuthInfos[ctx] = &clientcmdapi.AuthInfo{ClientCertificateData: s.pki.adminCertPEM, ClientKeyData: s.pki.adminKeyPEM}
		cfg.Contexts[ctx] = &clientcmdapi.Context{Cluster: ctx, AuthInfo: ctx, Namespace: "default"}
	}
	if len(members) > 0 {
		cfg.CurrentContext = members[0].spec.contextName()
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		panic(fmt.Sprintf("a kubeconfig serialises: %v", err))
	}
	return append([]byte(header), data...)
}

// writeKubeconfig writes the users' kubeconfig atomically, readable only by its owner.
func (s *supervisor) writeKubeconfig(path string) error {
	data := s.kubeconfigYAML(s.members, "# Written by `testbed up`: real Kubernetes members on loopback (TLS, client certificate).\n")
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".kubeconfig-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// stopMember stops a member's API server (its port then refuses connections); its controllers,
// scheduler and kwok keep running and reconnect when it comes back.
func (s *supervisor) stopMember(m *member) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.apiserver.stop(stopGrace)
	m.down = true
}

// startMember restarts a stopped API server on the same port and waits until it is ready.
func (s *supervisor) restartMember(m *member) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.apiserver.running() {
		m.down = false
		return nil
	}
	if err := s.startAPIServer(m); err != nil {
		return err
	}
	m.down = false
	return nil
}

// shutdown stops everything, the components before the API servers before etcd.
func (s *supervisor) shutdown() {
	var wg sync.WaitGroup
	stopAll := func(ps []*proc) {
		for _, p := range ps {
			if p == nil {
				continue
			}
			wg.Add(1)
			go func() { defer wg.Done(); p.stop(stopGrace) }()
		}
		wg.Wait()
	}
	var components, apiservers []*proc
	for _, m := range s.members {
		components = append(components, m.components...)
		apiservers = append(apiservers, m.apiserver)
	}
	stopAll(components)
	stopAll(apiservers)
	stopAll([]*proc{s.etcd})
}

// reservedPorts keeps a lock on every port this test bed chose, for its whole life: several
// test beds start at once (one per test), and a port one has checked free but not yet bound
// must not be handed to another. The locks go with the process, so a killed test bed leaves
// nothing held.
var reservedPorts struct {
	sync.Mutex
	files []*os.File
}

// freePort returns a port that can be listened on now, taken at random below Linux's default
// ephemeral range (32768-60999): a port the kernel hands out for port 0 is also one it hands
// out to outgoing connections, and one of those could take etcd's port between this check and
// etcd's bind. Nor may another test bed of this machine hold it (reservedPorts): two test beds
// could otherwise choose the same port for their API servers ("address already in use").
func freePort() (int, error) {
	dir := filepath.Join(os.TempDir(), "gitfleet-testbed-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, err
	}
	for range 200 {
		port := 20000 + rand.IntN(12000)
		lock, err := os.OpenFile(filepath.Join(dir, fmt.Sprint(port)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return 0, err
		}
		if syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			lock.Close()
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			lock.Close()
			continue
		}
		l.Close()
		reservedPorts.Lock()
		reservedPorts.files = append(reservedPorts.files, lock)
		reservedPorts.Unlock()
		return port, nil
	}
	return 0, errors.New("no free port between 20000 and 31999 after 200 tries")
}

func awaitServiceAccount(ctx context.Context, client kubernetes.Interface) error {
	return pollUntil(ctx, func() (bool, error) {
		_, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, nil
	})
}

// pollUntil checks `done` every 100ms until it says true, returns an error, or ctx ends.
func pollUntil(ctx context.Context, done func() (bool, error)) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := done()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
