package emulator

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/agentbox/sandbox/providers"
)

// sandbox is one emulated sandbox.
type sandbox struct {
	id, taskID, appID, name string
	backendID               string
	created                 time.Time
	timer                   *time.Timer

	// Guarded by Server.mu.
	tags map[string]string
	// result is set once the sandbox has ended; done is closed then.
	result *pb.GenericResult
	done   chan struct{}

	// workdir is the default working directory of its commands.
	workdir string
	// main is the entrypoint command (its output stays empty and its
	// stdin unread when the sandbox has none).
	main *execution

	// ready is closed once the readiness probe has passed (at create
	// when there is none); readyAt is set before.
	ready   chan struct{}
	readyAt time.Time

	execMu sync.Mutex
	execs  map[string]*execution
}

// control serves the ModalClient service.
type control struct {
	pb.UnimplementedModalClientServer
	s *Server
}

func (c *control) AuthTokenGet(ctx context.Context, _ *pb.AuthTokenGetRequest) (*pb.AuthTokenGetResponse, error) {
	return pb.AuthTokenGetResponse_builder{Token: c.s.jwt()}.Build(), nil
}

func (c *control) AppGetOrCreate(ctx context.Context, req *pb.AppGetOrCreateRequest) (*pb.AppGetOrCreateResponse, error) {
	name := req.GetAppName()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "app name is required")
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.apps[name]
	if !ok {
		if req.GetObjectCreationType() != pb.ObjectCreationType_OBJECT_CREATION_TYPE_CREATE_IF_MISSING {
			return nil, status.Errorf(codes.NotFound, "App '%s' not found", name)
		}
		id = newID("ap-")
		s.apps[name] = id
	}
	return pb.AppGetOrCreateResponse_builder{AppId: id}.Build(), nil
}

func (c *control) EnvironmentGetOrCreate(ctx context.Context, req *pb.EnvironmentGetOrCreateRequest) (*pb.EnvironmentGetOrCreateResponse, error) {
	return pb.EnvironmentGetOrCreateResponse_builder{
		EnvironmentId: "en-emulator",
		Metadata: pb.EnvironmentMetadata_builder{
			Name:     "main",
			Settings: pb.EnvironmentSettings_builder{ImageBuilderVersion: "2025.06"}.Build(),
		}.Build(),
	}.Build(), nil
}

// ImageGetOrCreate builds at once: an image is its Dockerfile commands,
// and the same commands give the same image until it is deleted.
func (c *control) ImageGetOrCreate(ctx context.Context, req *pb.ImageGetOrCreateRequest) (*pb.ImageGetOrCreateResponse, error) {
	sum := sha256.Sum256([]byte(strings.Join(req.GetImage().GetDockerfileCommands(), "\n")))
	recipe := hex.EncodeToString(sum[:])
	s := c.s
	s.mu.Lock()
	id, ok := s.images[recipe]
	if !ok {
		id = newID("im-")
		s.images[recipe] = id
	}
	s.mu.Unlock()
	return pb.ImageGetOrCreateResponse_builder{
		ImageId: id,
		Result:  pb.GenericResult_builder{Status: pb.GenericResult_GENERIC_STATUS_SUCCESS}.Build(),
	}.Build(), nil
}

// imageRecipe returns the recipe of a built image, "" when there is none.
// s.mu is held.
func (s *Server) imageRecipe(id string) string {
	for recipe, built := range s.images {
		if built == id {
			return recipe
		}
	}
	return ""
}

func (c *control) ImageFromId(ctx context.Context, req *pb.ImageFromIdRequest) (*pb.ImageFromIdResponse, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.s.imageRecipe(req.GetImageId()) == "" {
		return nil, status.Errorf(codes.NotFound, "Image %s not found", req.GetImageId())
	}
	return pb.ImageFromIdResponse_builder{ImageId: req.GetImageId()}.Build(), nil
}

// ImageDelete forgets an image: its id is no longer found, and building
// the same commands again gives a new one.
func (c *control) ImageDelete(ctx context.Context, req *pb.ImageDeleteRequest) (*emptypb.Empty, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	recipe := c.s.imageRecipe(req.GetImageId())
	if recipe == "" {
		return nil, status.Errorf(codes.NotFound, "Image %s not found", req.GetImageId())
	}
	delete(c.s.images, recipe)
	return &emptypb.Empty{}, nil
}

func (c *control) SandboxCreateV2(ctx context.Context, req *pb.SandboxCreateV2Request) (*pb.SandboxCreateV2Response, error) {
	s := c.s
	def := req.GetDefinition()
	if def == nil {
		return nil, status.Error(codes.InvalidArgument, "sandbox definition is required")
	}
	if err := checkAllowlists(def.GetNetworkAccess()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	known := slices.Contains(slices.Collect(maps.Values(s.apps)), req.GetAppId())
	name := def.GetName()
	if name != "" {
		for _, sb := range s.sandboxes {
			if sb.appID == req.GetAppId() && sb.name == name && sb.result == nil {
				s.mu.Unlock()
				return nil, status.Errorf(codes.AlreadyExists, "a running sandbox named %q exists in this app", name)
			}
		}
	}
	s.mu.Unlock()
	if !known {
		return nil, status.Errorf(codes.NotFound, "App %s not found", req.GetAppId())
	}
	key := idempotencyKey(ctx)
	if key != "" {
		s.mu.Lock()
		prev, ok := s.creates[key]
		s.mu.Unlock()
		if ok {
			// A retry of a create whose answer was lost.
			sb, err := s.lookup(prev)
			if err != nil {
				return nil, err
			}
			return sb.createResponse(ctx, s), nil
		}
	}
	env := envOf(req.GetSecretSources())
	maps.Copy(env, def.GetEnvironmentVariables().GetContents())
	id := newID("sb-")
	spec := providers.Spec{
		Labels: map[string]string{labelMarker: "1", labelID: id},
		Env:    env,
	}
	if def.GetBlockNetwork() {
		spec.Network = providers.NetworkOff
	}
	if res := def.GetResources(); res != nil {
		spec.Resources.CPUs = float64(res.GetMilliCpu()) / 1000
		spec.Resources.MemoryMB = int(res.GetMemoryMb())
	}
	info, err := s.backend.Create(ctx, spec)
	if err != nil {
		return nil, statusOf(err)
	}
	sb := &sandbox{id: id, taskID: newID("ta-"), appID: req.GetAppId(), name: name, backendID: info.ID,
		created: time.Now(), tags: tagMap(req.GetTags()), done: make(chan struct{}), execs: map[string]*execution{},
		workdir: def.GetWorkdir(), ready: make(chan struct{})}
	if sb.workdir != "" {
		if err := s.backend.Mkdir(ctx, info.ID, sb.workdir); err != nil {
			_ = s.backend.Delete(context.WithoutCancel(ctx), info.ID)
			return nil, statusOf(err)
		}
	}
	sb.main = s.startMain(sb, def.GetEntrypointArgs())
	s.startProbe(sb, def.GetReadinessProbe())
	s.mu.Lock()
	s.sandboxes[id] = sb
	s.tasks[sb.taskID] = sb
	if key != "" {
		s.creates[key] = id
	}
	if secs := def.GetTimeoutSecs(); secs > 0 {
		sb.timer = time.AfterFunc(time.Duration(secs)*time.Second, func() {
			s.background(func() { _ = s.end(context.Background(), sb, pb.GenericResult_GENERIC_STATUS_TIMEOUT) })
		})
	}
	s.mu.Unlock()
	return sb.createResponse(ctx, s), nil
}

func (sb *sandbox) createResponse(ctx context.Context, s *Server) *pb.SandboxCreateV2Response {
	return pb.SandboxCreateV2Response_builder{
		SandboxId:           sb.id,
		TaskId:              sb.taskID,
		CommandRouterAccess: pb.CommandRouterAccess_builder{Jwt: s.jwt(), Url: routerURL(ctx)}.Build(),
	}.Build()
}

// idempotencyKey is the key the SDKs send with every unary call (the same
// on each retry of one call).
func idempotencyKey(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("x-idempotency-key"); len(v) > 0 {
		return v[0]
	}
	return ""
}

// envOf merges the env maps of secret sources (named secrets are not
// served).
func envOf(sources []*pb.SecretSource) map[string]string {
	env := map[string]string{}
	for _, src := range sources {
		maps.Copy(env, src.GetEnv().GetContents())
	}
	return env
}

func tagMap(tags []*pb.SandboxTag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[t.GetTagName()] = t.GetTagValue()
	}
	return m
}

func tagList(m map[string]string) []*pb.SandboxTag {
	out := make([]*pb.SandboxTag, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, pb.SandboxTag_builder{TagName: k, TagValue: m[k]}.Build())
	}
	return out
}

// lookup returns the sandbox id.
func (s *Server) lookup(id string) (*sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[id]
	if !ok {
		return nil, notFound(id)
	}
	return sb, nil
}

// end finishes a sandbox with status st.
func (s *Server) end(ctx context.Context, sb *sandbox, st pb.GenericResult_GenericStatus) error {
	return s.finish(ctx, sb, pb.GenericResult_builder{Status: st}.Build())
}

// finish records a sandbox's result and deletes its backend sandbox; a
// sandbox that ended already keeps its first result.
func (s *Server) finish(ctx context.Context, sb *sandbox, result *pb.GenericResult) error {
	s.mu.Lock()
	if sb.result != nil {
		s.mu.Unlock()
		return nil
	}
	sb.result = result
	if sb.timer != nil {
		sb.timer.Stop()
	}
	close(sb.done)
	s.mu.Unlock()
	sb.execMu.Lock()
	for _, e := range sb.execs {
		e.abort()
	}
	sb.execMu.Unlock()
	err := s.backend.Delete(ctx, sb.backendID)
	if err != nil && !isNotFound(err) {
		return statusOf(err)
	}
	return nil
}

func (c *control) SandboxTerminateV2(ctx context.Context, req *pb.SandboxTerminateRequest) (*pb.SandboxTerminateResponse, error) {
	sb, err := c.s.lookup(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	existing := sb.result
	c.s.mu.Unlock()
	if existing != nil {
		return pb.SandboxTerminateResponse_builder{ExistingResult: existing}.Build(), nil
	}
	if err := c.s.end(ctx, sb, pb.GenericResult_GENERIC_STATUS_TERMINATED); err != nil {
		return nil, err
	}
	return &pb.SandboxTerminateResponse{}, nil
}

func (c *control) SandboxWaitV2(ctx context.Context, req *pb.SandboxWaitRequest) (*pb.SandboxWaitResponse, error) {
	sb, err := c.s.lookup(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	if t := req.GetTimeout(); t > 0 {
		wait := time.NewTimer(time.Duration(float64(t) * float64(time.Second)))
		defer wait.Stop()
		select {
		case <-sb.done:
		case <-wait.C:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return pb.SandboxWaitResponse_builder{Result: sb.result}.Build(), nil
}

func (c *control) SandboxTagsSetV2(ctx context.Context, req *pb.SandboxTagsSetRequest) (*emptypb.Empty, error) {
	sb, err := c.s.lookup(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	sb.tags = tagMap(req.GetTags())
	c.s.mu.Unlock()
	return &emptypb.Empty{}, nil
}

func (c *control) SandboxTagsGetV2(ctx context.Context, req *pb.SandboxTagsGetRequest) (*pb.SandboxTagsGetResponse, error) {
	sb, err := c.s.lookup(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return pb.SandboxTagsGetResponse_builder{Tags: tagList(sb.tags)}.Build(), nil
}

// listPage bounds one page of SandboxListV2.
const listPage = 100

func (c *control) SandboxListV2(ctx context.Context, req *pb.SandboxListRequest) (*pb.SandboxListResponse, error) {
	want := tagMap(req.GetTags())
	before := req.GetBeforeTimestamp()
	c.s.mu.Lock()
	var found []*sandbox
	for _, sb := range c.s.sandboxes {
		if req.GetAppId() != "" && sb.appID != req.GetAppId() {
			continue
		}
		if sb.result != nil && !req.GetIncludeFinished() {
			continue
		}
		// Compared as the float the client got, so that the last item
		// of a page is not on the next.
		if before > 0 && !(stamp(sb.created) < before) {
			continue
		}
		if !(providers.Filter{Labels: want}).Matches(sb.tags) {
			continue
		}
		found = append(found, sb)
	}
	// Newest first: the SDKs page with the last item's created_at.
	slices.SortFunc(found, func(a, b *sandbox) int { return b.created.Compare(a.created) })
	if len(found) > listPage {
		found = found[:listPage]
	}
	out := make([]*pb.SandboxInfo, 0, len(found))
	for _, sb := range found {
		out = append(out, pb.SandboxInfo_builder{
			Id:        sb.id,
			AppId:     sb.appID,
			Name:      sb.name,
			CreatedAt: stamp(sb.created),
			Tags:      tagList(sb.tags),
		}.Build())
	}
	c.s.mu.Unlock()
	return pb.SandboxListResponse_builder{Sandboxes: out}.Build(), nil
}

// stamp is t in the protocol's seconds.
func stamp(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func (c *control) SandboxGetFromNameV2(ctx context.Context, req *pb.SandboxGetFromNameRequest) (*pb.SandboxGetFromNameResponse, error) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	appID, ok := s.apps[req.GetAppName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "App '%s' not found", req.GetAppName())
	}
	var match *sandbox
	for _, sb := range s.sandboxes {
		if sb.appID != appID || sb.name != req.GetSandboxName() || sb.name == "" {
			continue
		}
		if sb.result != nil && !req.GetIncludeTerminated() {
			continue
		}
		if match == nil || sb.created.After(match.created) {
			match = sb
		}
	}
	if match == nil {
		return nil, status.Errorf(codes.NotFound, "Sandbox with name '%s' not found in App '%s'", req.GetSandboxName(), req.GetAppName())
	}
	return pb.SandboxGetFromNameResponse_builder{SandboxId: match.id}.Build(), nil
}

// SandboxGetFromName is the V1 call the SDKs fall back to; the emulator
// has no V1 sandboxes.
func (c *control) SandboxGetFromName(ctx context.Context, req *pb.SandboxGetFromNameRequest) (*pb.SandboxGetFromNameResponse, error) {
	return nil, status.Errorf(codes.NotFound, "Sandbox with name '%s' not found", req.GetSandboxName())
}

func (c *control) SandboxGetTaskIdV2(ctx context.Context, req *pb.SandboxGetTaskIdRequest) (*pb.SandboxGetTaskIdResponse, error) {
	sb, err := c.s.lookup(req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if sb.result != nil {
		return pb.SandboxGetTaskIdResponse_builder{TaskResult: sb.result}.Build(), nil
	}
	return pb.SandboxGetTaskIdResponse_builder{TaskId: &sb.taskID}.Build(), nil
}

func (c *control) SandboxGetCommandRouterAccess(ctx context.Context, req *pb.SandboxGetCommandRouterAccessRequest) (*pb.SandboxGetCommandRouterAccessResponse, error) {
	id := req.GetSandboxId()
	if id == "" {
		c.s.mu.Lock()
		if sb, ok := c.s.tasks[req.GetTaskId()]; ok {
			id = sb.id
		}
		c.s.mu.Unlock()
	}
	if _, err := c.s.lookup(cmp.Or(id, req.GetTaskId())); err != nil {
		return nil, err
	}
	return pb.SandboxGetCommandRouterAccessResponse_builder{Jwt: c.s.jwt(), Url: routerURL(ctx)}.Build(), nil
}

// The V1 sandbox calls, made by the SDKs for ids of the V1 shape (sb- and
// 22 base-62 characters): the emulator mints only V2 ids, so no such
// sandbox exists.

func (c *control) SandboxWait(ctx context.Context, req *pb.SandboxWaitRequest) (*pb.SandboxWaitResponse, error) {
	return nil, notFound(req.GetSandboxId())
}

func (c *control) SandboxTerminate(ctx context.Context, req *pb.SandboxTerminateRequest) (*pb.SandboxTerminateResponse, error) {
	return nil, notFound(req.GetSandboxId())
}

func (c *control) SandboxGetTaskId(ctx context.Context, req *pb.SandboxGetTaskIdRequest) (*pb.SandboxGetTaskIdResponse, error) {
	return nil, notFound(req.GetSandboxId())
}

func (c *control) SandboxTagsGet(ctx context.Context, req *pb.SandboxTagsGetRequest) (*pb.SandboxTagsGetResponse, error) {
	return nil, notFound(req.GetSandboxId())
}

func (c *control) SandboxTagsSet(ctx context.Context, req *pb.SandboxTagsSetRequest) (*emptypb.Empty, error) {
	return nil, notFound(req.GetSandboxId())
}

// Probe intervals: the default when the probe names none, and the
// shortest the emulator runs.
const (
	defaultProbeInterval = 100 * time.Millisecond
	minProbeInterval     = 10 * time.Millisecond
)

// startProbe makes sb ready once its readiness probe's command exits 0,
// running it every interval until then or until the sandbox ends. A
// sandbox without an exec probe is ready at once (TCP probes are not
// checked).
func (s *Server) startProbe(sb *sandbox, probe *pb.Probe) {
	markReady := func() {
		sb.readyAt = time.Now()
		close(sb.ready)
	}
	argv := probe.GetExecCommand().GetArgv()
	if len(argv) == 0 {
		markReady()
		return
	}
	interval := defaultProbeInterval
	if ms := probe.GetIntervalMs(); ms > 0 {
		interval = max(time.Duration(ms)*time.Millisecond, minProbeInterval)
	}
	s.background(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			res, err := s.backend.Exec(s.ctx, sb.backendID, providers.ExecRequest{Argv: argv, Cwd: sb.workdir, Stdout: io.Discard, Stderr: io.Discard})
			if err == nil && res.ExitCode == 0 {
				markReady()
				return
			}
			select {
			case <-tick.C:
			case <-sb.done:
				return
			case <-s.ctx.Done():
				return
			}
		}
	})
}

// domainPattern is a host name, optionally behind a "*." wildcard.
var domainPattern = regexp.MustCompile(`^(\*\.)?([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// checkAllowlists refuses, as Modal does, outbound allowlists with an
// entry that is not a CIDR or a domain name (the emulator does not
// enforce the lists).
func checkAllowlists(na *pb.NetworkAccess) error {
	for _, c := range na.GetAllowedCidrs() {
		if _, err := netip.ParsePrefix(c); err != nil {
			return status.Errorf(codes.InvalidArgument, "Invalid CIDR (outbound IPv4): %s", c)
		}
	}
	for _, d := range na.GetAllowedDomains() {
		if len(d) > 253 || !domainPattern.MatchString(d) {
			return status.Errorf(codes.InvalidArgument, "Invalid domain (outbound): %s", d)
		}
	}
	return nil
}
