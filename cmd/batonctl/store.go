package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/config"
	"github.com/baton-go/baton/config/consulconfig"
)

// loadConfig reads the configuration as the library does: the file named
// by --config, the BATON_* environment, then the flags that set keys.
func loadConfig(o options) (*config.Config, error) {
	var sources []config.Source
	if o.configFile != "" {
		sources = append(sources, config.File(o.configFile))
	}
	sources = append(sources, config.Env("BATON_"))
	if flags := o.keys(); len(flags) > 0 {
		sources = append(sources, config.Map(flags))
	}
	return config.Load(sources...)
}

// keys returns the configuration keys the flags set: --app, --tenant,
// --redis, --consul, --prefix (the key prefix of the store --backend,
// --redis or --consul names, or of both stores when none does) and
// --timeout when given (the Redis client's timeouts).
func (o options) keys() map[string]any {
	flags := map[string]any{}
	set := func(key, value string) {
		if value != "" {
			flags[key] = value
		}
	}
	set("instance.app", o.app)
	set("instance.tenant", o.tenant)
	set("consul.address", o.consul)
	if o.redis != "" {
		flags["redis.addrs"] = strings.Split(o.redis, ",")
	}
	if o.backend != "consul" {
		set("redis.key-prefix", o.prefix)
	}
	if o.backend != "redis" {
		set("consul.key-prefix", o.prefix)
	}
	if o.timeoutSet {
		ms := max(o.timeout.Milliseconds(), 1)
		for _, k := range []string{"dial", "read", "write"} {
			flags["redis."+k+"-timeout-in-milliseconds"] = ms
		}
	}
	return flags
}

// backendOf is the store the configuration names: --backend if given,
// else Consul when consul.address is set and redis.addrs is not, else
// Redis.
func backendOf(o options, cfg *config.Config) string {
	if o.backend != "" {
		return o.backend
	}
	if cfg.Consul.Address != "" && slices.Equal(cfg.Redis.Addrs, config.Default().Redis.Addrs) {
		return "consul"
	}
	return "redis"
}

// open loads the configuration and opens the store it names. A Redis
// store is pinged first, so that an unreachable server fails at once with
// its address.
func open(ctx context.Context, o options) (*session, error) {
	cfg, err := loadConfig(o)
	if err != nil {
		return nil, err
	}
	if cfg.Instance.App == "" {
		return nil, usagef("which service? pass --app NAME, or set instance.app in --config FILE or BATON_INSTANCE_APP")
	}
	s := &session{o: o, cfg: cfg, tenant: cfg.Instance.Tenant, app: cfg.Instance.App}
	if s.tenant == "" {
		s.tenant = config.DefaultTenant
	}
	pctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	switch backendOf(o, cfg) {
	case "consul":
		st, err := consulconfig.Store(*cfg)
		if err != nil {
			return nil, err
		}
		s.store, s.kind, s.where, s.closeAll = st, "consul", consulWhere(cfg), st.Close
	default:
		if cfg.Redis.Layout == config.LayoutSpring {
			st, err := cfg.SpringRedisStore(pctx)
			if err != nil {
				return nil, err
			}
			if err := st.Ping(pctx); err != nil {
				st.Close()
				return nil, err
			}
			s.store, s.kind, s.where, s.closeAll = st, "redis (spring layout)", cfg.Redis.Where(), st.Close
			break
		}
		st, err := cfg.RedisStore(pctx)
		if err != nil {
			return nil, err
		}
		if err := st.Ping(pctx); err != nil {
			st.Close()
			return nil, err
		}
		s.store, s.kind, s.where, s.closeAll = st, "redis", cfg.Redis.Where(), st.Close
	}
	return s, nil
}

// consulWhere names the Consul agent the configuration points at, with
// the password of any userinfo redacted.
func consulWhere(cfg *config.Config) string {
	a := consulconfig.APIConfig(cfg.Consul)
	return backend.HideUserinfo(fmt.Sprintf("%s://%s", a.Scheme, a.Address))
}
