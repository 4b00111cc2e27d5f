package backend

import "errors"

// ErrAuth reports that the store refused the client's credentials: a
// wrong password or user name (Redis's WRONGPASS), none where the server
// wants one (NOAUTH), or an ACL token Consul does not know ("ACL not
// found"). Retrying does not help; the message says which setting to fix.
// It is not reported for a known user or token that lacks a permission.
var ErrAuth = errors.New("the store refused the credentials")
