package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"time"
)

// ErrUnreachable is returned when no agent answers on the socket.
var ErrUnreachable = errors.New("no vip agent answers")

// ErrSocketDenied is returned when the socket exists but this user may not
// connect to it.
var ErrSocketDenied = errors.New("the vip agent's socket is not open to this user")

// RemoteError is an error response from the agent.
type RemoteError struct {
	Status  int
	Code    string
	Message string
}

func (e *RemoteError) Error() string { return e.Message }

// Client talks to an agent over its unix socket.
type Client struct {
	socket string
	hc     *http.Client
}

// NewClient returns a client of the agent listening on socket.
func NewClient(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableCompression: true,
	}
	return &Client{socket: socket, hc: &http.Client{Transport: tr}}
}

// Socket returns the socket path the client dials.
func (c *Client) Socket() string { return c.socket }

// unreachable tells a dial failure (no agent) from other errors.
func (c *Client) wrap(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("%w on %s", ErrUnreachable, c.socket)
		}
		if errors.Is(err, os.ErrPermission) {
			return fmt.Errorf("%w (%s)", ErrSocketDenied, c.socket)
		}
	}
	return fmt.Errorf("talk to the vip agent on %s: %w", c.socket, err)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	resp, err := c.send(ctx, method, path, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("read the agent's answer: %w", err)
	}
	return nil
}

// send makes a request and returns the response if it is a 200; the
// caller closes its body.
func (c *Client) send(ctx context.Context, method, path string, in any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://vip"+path, body)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.wrap(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

func decodeError(resp *http.Response) error {
	var e Error
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &e) != nil || e.Error == "" {
		e = Error{Error: fmt.Sprintf("the agent answered %s", resp.Status), Code: CodeInternal}
	}
	return &RemoteError{Status: resp.StatusCode, Code: Code(e.Code), Message: e.Error}
}

// Claim sends a claim and returns once every address is live.
func (c *Client) Claim(ctx context.Context, r ClaimRequest) (ClaimResponse, error) {
	var out ClaimResponse
	err := c.do(ctx, http.MethodPost, "/v1/claims", r, &out)
	for i := range out.Refused {
		f := &out.Refused[i]
		f.Code = Code(f.Code)
		if f.ClaimedAt.IsZero() {
			f.ClaimedAt = f.Since // an agent of the release before
		}
	}
	return out, err
}

// Refresh re-arms the windows of held addresses.
func (c *Client) Refresh(ctx context.Context, r AddrsRequest) (RefreshResponse, error) {
	var out RefreshResponse
	return out, c.do(ctx, http.MethodPost, "/v1/refresh", r, &out)
}

// Release gives addresses up.
func (c *Client) Release(ctx context.Context, r AddrsRequest) (ReleaseResponse, error) {
	var out ReleaseResponse
	return out, c.do(ctx, http.MethodPost, "/v1/release", r, &out)
}

// Status describes the agent and its claims.
func (c *Client) Status(ctx context.Context) (StatusResponse, error) {
	var out StatusResponse
	return out, c.do(ctx, http.MethodGet, "/v1/status", nil, &out)
}

// StatusJSON opens the agent's status as JSON indented by two spaces, the
// form vip status --json prints, for the caller to copy as it comes and
// close: the agent formats it, so printing 10,000 claims needs no
// decoding and encoding again, nor room for all of it. indented is false
// when the agent predates that form and answers compact JSON instead.
// Errors reading the body say that they are.
func (c *Client) StatusJSON(ctx context.Context) (body io.ReadCloser, indented bool, err error) {
	resp, err := c.send(ctx, http.MethodGet, "/v1/status?indent=true", nil)
	if err != nil {
		return nil, false, err
	}
	r := &answerReader{r: bufio.NewReaderSize(resp.Body, 64<<10), body: resp.Body}
	head, err := r.r.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		resp.Body.Close()
		return nil, false, fmt.Errorf("read the agent's answer: %w", err)
	}
	return r, bytes.Equal(head, []byte("{\n")), nil
}

// answerReader reads the body of an answer, saying so in its errors.
type answerReader struct {
	r    *bufio.Reader
	body io.Closer
}

func (a *answerReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("read the agent's answer: %w", err)
	}
	return n, err
}

func (a *answerReader) Close() error { return a.body.Close() }

// WhoHas returns the who-has table: the requests the agent's captures saw.
// An agent of the release before serves it at /v1/traffic only, which is
// asked when /v1/whohas is not found.
func (c *Client) WhoHas(ctx context.Context) (WhoHasResponse, error) {
	var out WhoHasResponse
	err := c.do(ctx, http.MethodGet, "/v1/whohas", nil, &out)
	if remote := (*RemoteError)(nil); errors.As(err, &remote) && remote.Code == CodeNotFound {
		err = c.do(ctx, http.MethodGet, "/v1/traffic", nil, &out)
	}
	return out, err
}

// EventStream reads the agent's events.
type EventStream struct {
	body io.ReadCloser
	sc   *bufio.Scanner
}

// Events opens the agent's event stream; cancel ctx or Close to end it.
func (c *Client) Events(ctx context.Context) (*EventStream, error) {
	return c.EventsSince(ctx, time.Time{})
}

// EventsSince is Events, starting with the events later than since that
// the agent still keeps (a missed event first if some are no longer kept);
// a zero since is Events.
func (c *Client) EventsSince(ctx context.Context, since time.Time) (*EventStream, error) {
	u := "http://vip/v1/events"
	if !since.IsZero() {
		u += "?since=" + url.QueryEscape(since.Format(time.RFC3339Nano))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.wrap(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return &EventStream{body: resp.Body, sc: sc}, nil
}

// Next returns the next event; io.EOF when the agent ended the stream.
func (s *EventStream) Next() (Event, error) {
	for s.sc.Scan() {
		line := bytes.TrimSpace(s.sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var ev Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return Event{}, fmt.Errorf("read an event: %w", err)
		}
		ev.Kind = ev.Kind.ThisRelease()
		return ev, nil
	}
	if err := s.sc.Err(); err != nil {
		return Event{}, err
	}
	return Event{}, io.EOF
}

// Close ends the stream.
func (s *EventStream) Close() error { return s.body.Close() }

// Fleet reads the whole fleet through an agent guarded by a store.
func (c *Client) Fleet(ctx context.Context) (FleetResponse, error) {
	var out FleetResponse
	err := c.do(ctx, http.MethodGet, "/v1/fleet", nil, &out)
	for i := range out.Claims {
		c := &out.Claims[i]
		c.State = FleetState(c.State)
		if c.ClaimedAt.IsZero() {
			c.ClaimedAt = c.Since // an agent of the release before
		}
	}
	return out, err
}

// History reads the store's history of addr, or of group's addresses
// (one of the two), through an agent guarded by a store: its latest
// changes, oldest first.
func (c *Client) History(ctx context.Context, addr, group string) (HistoryResponse, error) {
	var out HistoryResponse
	q := url.Values{}
	if addr != "" {
		q.Set("addr", addr)
	}
	if group != "" {
		q.Set("group", group)
	}
	err := c.do(ctx, http.MethodGet, "/v1/history?"+q.Encode(), nil, &out)
	for i := range out.Changes {
		ch := &out.Changes[i]
		if ch.Kind == NextHistoryFailover {
			ch.Kind = HistoryFailover
		}
		if ch.FencedAt.IsZero() {
			ch.FencedAt = ch.Since // an agent of the release before
		}
	}
	return out, err
}

// Move moves addresses between nodes through an agent guarded by a store,
// and returns once each is live on the target (or failed).
func (c *Client) Move(ctx context.Context, r MoveRequest) (MoveResponse, error) {
	var out MoveResponse
	return out, c.do(ctx, http.MethodPost, "/v1/move", r, &out)
}
