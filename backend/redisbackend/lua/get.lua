-- get (Store.Get): what is on K.
define()
return holder()
