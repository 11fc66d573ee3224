package main

// The admin endpoint, shaped like `gitfleet sim --admin` so test harnesses drive both backends
// the same way:
//
//   - GET /members lists members: name, context, server, down.
//   - GET /members/{name} shows one.
//   - POST /members/{name}/faults with {"down": true} stops the member's API server (its port
//     then refuses connections; the answer comes once it has stopped), {"down": false} starts it
//     again on the same port (the answer comes once it answers /readyz). Other fault fields are
//     refused: real API servers are not made to fail at random here.
//   - GET /healthz answers ok.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

func (s *supervisor) describe(m *member) map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	return map[string]any{
		"name":    m.spec.Name,
		"context": m.spec.contextName(),
		"server":  m.server(),
		"down":    m.down,
		"faults":  map[string]any{"down": m.down},
		"logs":    logPath(s.state, m.spec.Name+"/kube-apiserver"),
	}
}

func (s *supervisor) adminHandler() http.Handler {
	reply := func(w http.ResponseWriter, code int, body any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(body)
	}
	problem := func(w http.ResponseWriter, code int, format string, args ...any) {
		reply(w, code, map[string]any{"error": fmt.Sprintf(format, args...)})
	}
	find := func(name string) *member {
		for _, m := range s.members {
			if m.spec.Name == name {
				return m
			}
		}
		return nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seg := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		switch {
		case r.Method == http.MethodGet && len(seg) == 1 && seg[0] == "healthz":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("ok"))
		case r.Method == http.MethodGet && len(seg) == 1 && seg[0] == "members":
			var all []map[string]any
			for _, m := range s.members {
				all = append(all, s.describe(m))
			}
			reply(w, http.StatusOK, map[string]any{"members": all})
		case r.Method == http.MethodGet && len(seg) == 2 && seg[0] == "members":
			m := find(seg[1])
			if m == nil {
				problem(w, http.StatusNotFound, "no member named %q", seg[1])
				return
			}
			reply(w, http.StatusOK, s.describe(m))
		case (r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch) &&
			len(seg) == 3 && seg[0] == "members" && seg[2] == "faults":
			m := find(seg[1])
			if m == nil {
				problem(w, http.StatusNotFound, "no member named %q", seg[1])
				return
			}
			var update map[string]json.RawMessage
			if err := json.NewDecoder(r.Body).Decode(&update); err != nil {
				problem(w, http.StatusBadRequest, "faults must be JSON like {\"down\": true}: %v", err)
				return
			}
			var down *bool
			for k, v := range update {
				if k != "down" {
					problem(w, http.StatusUnprocessableEntity, "%s: the test bed only stops and starts members ({\"down\": true|false})", k)
					return
				}
				var d bool
				if err := json.Unmarshal(v, &d); err != nil {
					problem(w, http.StatusBadRequest, "down: %v", err)
					return
				}
				down = &d
			}
			if down != nil && *down {
				s.stopMember(m)
			} else if down != nil {
				if err := s.restartMember(m); err != nil {
					problem(w, http.StatusInternalServerError, "%s: %v", m.spec.Name, err)
					return
				}
			}
			reply(w, http.StatusOK, s.describe(m))
		default:
			problem(w, http.StatusNotFound, "not found: use GET /members, GET /members/{name}, POST /members/{name}/faults")
		}
	})
}
