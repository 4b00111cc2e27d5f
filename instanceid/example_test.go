package instanceid_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/baton-go/baton/instanceid"
)

func ExampleParse() {
	for _, s := range []string{
		"10.0.0.7:acme:billing:8080",
		"[fd00::7]:acme:billing:8080",
		"fd00::7:acme:billing:8080",
	} {
		id, err := instanceid.Parse(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(id.IP, id.Tenant, id.App, id.Port)
	}
	// Output:
	// 10.0.0.7 acme billing 8080
	// fd00::7 acme billing 8080
	// instanceid: parse "fd00::7:acme:billing:8080": ip "fd00::7" is an IPv6 address and must be in brackets: [fd00::7]
}

func ExampleDetect() {
	// An explicit IP wins over the advertise address and the network
	// interfaces; the tenant defaults to "default".
	id, err := instanceid.Detect(instanceid.Options{IP: "10.0.0.7", App: "billing", Port: 8080})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(id)

	// A Consul agent's advertise address gives the IP when none is set.
	id, err = instanceid.Detect(instanceid.Options{AdvertiseAddr: "[fd00::7]:8301", Tenant: "acme", App: "billing", Port: 8080})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(id)

	_, err = instanceid.Detect(instanceid.Options{IP: "10.0.0.7", App: "billing", Port: 70000})
	fmt.Println(err, errors.Is(err, instanceid.ErrInvalid))
	// Output:
	// 10.0.0.7:default:billing:8080
	// [fd00::7]:acme:billing:8080
	// instanceid: port "70000" is not in 1..65535 true
}

func ExampleID_String() {
	id, err := instanceid.New("fd00::7", "acme", "billing", 8080)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(id.String())

	id, err = instanceid.New("::ffff:10.0.0.7", "acme", "billing", 8080)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(id.String())
	// Output:
	// [fd00::7]:acme:billing:8080
	// 10.0.0.7:acme:billing:8080
}

func ExampleID_MarshalText() {
	id, err := instanceid.New("10.0.0.7", "acme", "billing", 8080)
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := json.Marshal(map[string]instanceid.ID{"master": id})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(b))
	// Output:
	// {"master":"10.0.0.7:acme:billing:8080"}
}
