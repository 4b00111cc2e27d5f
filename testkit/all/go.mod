// Module all holds the tests that need every baton module at once: the
// chaos suite, the Consul leg of the root module's store-table tests, and
// the check that the Go in the README and docs/ compiles.
module github.com/baton-go/baton/testkit/all

go 1.26.7

replace github.com/baton-go/baton => ../..

replace github.com/baton-go/baton/backend/consulbackend => ../../backend/consulbackend

replace github.com/baton-go/baton/config/consulconfig => ../../config/consulconfig

replace github.com/baton-go/baton/testkit/consultest => ../../testkit/consultest

replace github.com/baton-go/baton/metrics => ../../metrics

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/baton-go/baton v0.0.0-00010101000000-000000000000
	github.com/baton-go/baton/backend/consulbackend v0.0.0-00010101000000-000000000000
	github.com/baton-go/baton/config/consulconfig v0.0.0-00010101000000-000000000000
	github.com/baton-go/baton/metrics v0.0.0-00010101000000-000000000000
	github.com/baton-go/baton/testkit/consultest v0.0.0-00010101000000-000000000000
	github.com/go-co-op/gocron/v2 v2.21.2
	github.com/google/uuid v1.6.0
	github.com/hashicorp/consul/api v1.34.5
	github.com/prometheus/client_golang v1.25.0
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	github.com/armon/go-metrics v0.4.1 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/fatih/color v1.19.0 // indirect
	github.com/go-viper/mapstructure/v2 v2.5.0 // indirect
	github.com/hashicorp/errwrap v1.1.0 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/hashicorp/go-hclog v1.6.3 // indirect
	github.com/hashicorp/go-immutable-radix v1.3.1 // indirect
	github.com/hashicorp/go-metrics v0.6.0 // indirect
	github.com/hashicorp/go-multierror v1.1.1 // indirect
	github.com/hashicorp/go-rootcerts v1.0.2 // indirect
	github.com/hashicorp/golang-lru v1.0.2 // indirect
	github.com/hashicorp/serf v0.10.4 // indirect
	github.com/jonboulle/clockwork v0.5.0 // indirect
	github.com/mattn/go-colorable v0.1.15 // indirect
	github.com/mattn/go-isatty v0.0.22 // indirect
	github.com/mitchellh/go-homedir v1.1.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pelletier/go-toml/v2 v2.2.2 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/exp v0.0.0-20260218203240-3dfff04db8fa // indirect
	golang.org/x/sys v0.48.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
