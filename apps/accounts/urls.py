from django.urls import path

from apps.accounts import views
from apps.accounts.scope import owners

app_name = "accounts"
urlpatterns = [
    path("login/", views.login_view, name="login"),
    path("sso/", views.sso_start, name="sso-start"),
    path("sso/callback/", views.sso_callback, name="sso-callback"),
    path("logout/", views.logout_view, name="logout"),
    path("tokens/", views.api_tokens, name="api-tokens"),
    path("password/", views.password_change, name="password-change"),
    path("text-view/", views.text_view, name="text-view"),
    path("tokens/<int:pk>/revoke/", views.api_token_revoke, name="api-token-revoke"),
]

# Where each URL parameter finds its project (apps/accounts/scope.py).
owners("accounts", {"pk": None})
