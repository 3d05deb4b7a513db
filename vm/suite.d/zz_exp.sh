pair --cmp --srv-wait 2 mckey_rxe 60 "(sleep 1.5; ip addr add 239.0.0.1/32 dev veth1 autojoin) & mckey -m 239.0.0.1 -b 192.0.2.2" "sleep 2; mckey -m 239.0.0.1 -s -b 192.0.2.1"
