package consulbackend

import (
	"fmt"
	"strings"

	"github.com/baton-go/baton/backend"
)

// ACLPolicy returns the rules (HCL) of a Consul ACL policy for the
// processes of one service, tenant's app, on stores with the KV prefix
// prefix (DefaultPrefix if empty), or with app "" of every app of the
// tenant: write access to those keys alone — leases, fencing counters,
// waiting lines, members and the restart guard's markers, all named after
// the {tenant:app} hash tag — and to sessions, which hold every lease.
// Create it with
//
//	consul acl policy create -name acme-billing -rules @policy.hcl
//
// and give the service's processes a token of it (consul.token). With
// such a token a process can neither read nor write another service's
// keys, nor hold up its grants: each service has restart guard markers
// of its own (see WithRestartGuard), and may only read its tenant's. What it can still do to other
// services is in the README: session:write on a node lets it destroy
// any session on that node, and so end another service's lease early
// (which fencing tokens catch). Listing the leases of more than one
// service (batonctl locks with an empty prefix) needs a wider token.
//
// tenant and app must be names instanceid accepts (no ':', braces,
// spaces or control characters).
func ACLPolicy(prefix, tenant, app string) (string, error) {
	s := &Store{prefix: DefaultPrefix}
	if prefix != "" {
		if err := WithPrefix(prefix)(s); err != nil {
			return "", err
		}
	}
	tag := backend.AppKey(tenant, app) // "{tenant:app}"
	err := backend.ValidateTagName("tenant", tenant)
	if app == "" {
		tag = strings.TrimSuffix(tag, "}") // "{tenant:", every app's
	} else if err == nil {
		err = backend.ValidateTagName("app", app)
	}
	if err != nil {
		return "", fmt.Errorf("consulbackend: acl policy: %w", err)
	}
	var b strings.Builder
	for _, p := range []string{
		s.LeaseKey(tag), s.FenceKey(tag), strings.TrimSuffix(s.LineKey(tag), "/"), strings.TrimSuffix(s.memberPrefix(tag), "/"),
		s.guardPath(bootedSuffix, tag), s.guardPath(recoveringSuffix, tag),
	} {
		fmt.Fprintf(&b, "key_prefix %q { policy = \"write\" }\n", p)
	}
	if app != "" {
		// The tenant's restart guard markers, which a service's grant
		// reads and only the tenant's token (or batonctl init) writes.
		t := tag[:strings.IndexByte(tag, ':')+1] + "}"
		for _, p := range []string{s.guardPath(bootedSuffix, t), s.guardPath(recoveringSuffix, t)} {
			fmt.Fprintf(&b, "key %q { policy = \"read\" }\n", p)
		}
	}
	b.WriteString("session_prefix \"\" { policy = \"write\" }\n")
	return b.String(), nil
}
